use sqlx::{Connection, Executor, Row};
use std::time::Instant;
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    println!("connect {:?}", t.elapsed());
    c.execute(
        "CREATE TABLE IF NOT EXISTS t (id bigserial primary key, run text, seq bigint, data bytea)",
    )
    .await
    .unwrap();
    let n = 5000;
    let t = Instant::now();
    for i in 0..n {
        let r = sqlx::query("SELECT $1::int8")
            .bind(i as i64)
            .fetch_one(&mut c)
            .await
            .unwrap();
        let _v: i64 = r.get(0);
    }
    println!(
        "select {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let blob = vec![7u8; 2000];
    let t = Instant::now();
    for i in 0..2000 {
        sqlx::query("INSERT INTO t (run, seq, data) VALUES ($1, $2, $3)")
            .bind("r1")
            .bind(i as i64)
            .bind(&blob)
            .execute(&mut c)
            .await
            .unwrap();
    }
    println!(
        "insert autocommit {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / 2000.0
    );
    let t = Instant::now();
    for i in 0..500 {
        let mut tx = c.begin().await.unwrap();
        for j in 0..10 {
            sqlx::query("INSERT INTO t (run, seq, data) VALUES ($1, $2, $3)")
                .bind("r2")
                .bind((i * 10 + j) as i64)
                .bind(&blob)
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    }
    println!(
        "tx of 10 inserts {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / 500.0
    );
}
