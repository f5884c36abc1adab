//! `trellis-test-pg start` starts a throwaway PostgreSQL cluster on loopback and prints its
//! `TRELLIS_TEST_PG` value (export it, and every test shares that cluster, each in its own
//! database); `trellis-test-pg stop VALUE` stops it and removes its directory.

use std::process::ExitCode;

use trellis_test_pg::{Cluster, Durability};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["start"] => {
            let spec = Cluster::start(Durability::Fast).detach();
            #[allow(clippy::print_stdout)]
            {
                println!("{spec}");
            }
            ExitCode::SUCCESS
        }
        ["stop", spec] => {
            Cluster::stop_shared(spec);
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: trellis-test-pg start | trellis-test-pg stop DIR:PORT:BINDIR");
            ExitCode::from(2)
        }
    }
}
