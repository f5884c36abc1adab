//! The `trellis` binary: parses the command line and hands it to `trellis_cli`.

use clap::Parser;

/// mimalloc: the engine allocates many small, short-lived objects per step; mimalloc's
/// thread-local free lists handle them with a fraction of glibc malloc's instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    trellis_cli::main(trellis_cli::Cli::parse())
}
