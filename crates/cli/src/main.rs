//! The `trellis` binary: parses the command line and hands it to `trellis_cli`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    trellis_cli::main(trellis_cli::Cli::parse())
}
