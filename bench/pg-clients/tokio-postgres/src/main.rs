use std::time::Instant;
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    println!("connect {:?}", t.elapsed());
    client.batch_execute("CREATE TABLE IF NOT EXISTS t (id bigserial primary key, run text, seq bigint, data bytea)").await.unwrap();
    let sel = client.prepare("SELECT $1::int8").await.unwrap();
    let n = 5000;
    let t = Instant::now();
    for i in 0..n {
        let _r: i64 = client.query_one(&sel, &[&(i as i64)]).await.unwrap().get(0);
    }
    println!(
        "select {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let ins = client
        .prepare("INSERT INTO t (run, seq, data) VALUES ($1, $2, $3)")
        .await
        .unwrap();
    let blob = vec![7u8; 2000];
    let t = Instant::now();
    for i in 0..2000 {
        client
            .execute(&ins, &[&"r1", &(i as i64), &blob])
            .await
            .unwrap();
    }
    println!(
        "insert autocommit {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / 2000.0
    );
    let t = Instant::now();
    for i in 0..500 {
        let tx = client.transaction().await.unwrap();
        for j in 0..10 {
            tx.execute(&ins, &[&"r2", &((i * 10 + j) as i64), &blob])
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
