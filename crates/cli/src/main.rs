//! The `trellis` binary: parses the command line and hands it to `trellis_cli`.

use clap::Parser;

/// mimalloc: the engine allocates many small, short-lived objects per step; mimalloc's
/// thread-local free lists handle them with a fraction of glibc malloc's instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `arena_eager_commit` option (index in mimalloc 3's `mi_option_e`).
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// mimalloc's `allow_thp` option (index in mimalloc 3's `mi_option_e`).
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

fn main() -> std::process::ExitCode {
    configure_allocator();
    end_quietly_on_a_closed_pipe();
    trellis_cli::main(trellis_cli::Cli::parse())
}

/// `trellis search … | head`: once the reader has gone, `println!` panics with "failed
/// printing to stdout: Broken pipe". Like ripgrep, end quietly and successfully instead: the
/// reader took what it wanted. SIGPIPE itself stays ignored (Rust's default), so a write to a
/// dead child's pipe or a closed socket is still an error the code handles, not a kill.
fn end_quietly_on_a_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if is_closed_pipe_panic(message) {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// The panic message of `print!`/`eprint!` on a pipe whose reader has gone.
fn is_closed_pipe_panic(message: &str) -> bool {
    (message.starts_with("failed printing to stdout")
        || message.starts_with("failed printing to stderr"))
        && message.contains("Broken pipe")
}

/// mimalloc commits its arenas eagerly on Linux by default (2 = "on overcommit systems"),
/// which leaves ~9.5 MiB resident in an idle `trellis acp` (docs/benchmarks.md, "`trellis
/// acp`"); committing on demand costs a few `mprotect` calls. The option is read when the
/// first arena is reserved, which happens before `main` (the runtime's first allocations), so
/// on Linux this runs as a constructor ordered after std's (`.init_array.00099`) and before
/// mimalloc's own (priority 101). A value set through MIMALLOC_ARENA_EAGER_COMMIT (anything
/// but the default) is kept.
///
/// Likewise transparent huge pages are turned off (`allow_thp` = 0, which mimalloc applies
/// with `prctl(PR_SET_THP_DISABLE)` when it starts; child processes inherit it): mimalloc
/// advises its arenas for huge pages, so a growing heap faulted in 2 MiB pages, each zeroed
/// whole — a `trellis serve` discussion run took 12–16 ms of CPU with them, 6.2–6.4 ms
/// without (docs/benchmarks.md, "Team scale"). MIMALLOC_ALLOW_THP set to anything but the
/// default is kept too.
#[allow(unsafe_code)]
extern "C" fn configure_allocator() {
    // SAFETY: option accessors of the allocator this binary links; they take and return
    // plain integers and allocate nothing.
    unsafe {
        if libmimalloc_sys::mi_option_get(ARENA_EAGER_COMMIT) == 2 {
            libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        }
        if libmimalloc_sys::mi_option_get(ALLOW_THP) == 1 {
            libmimalloc_sys::mi_option_set(ALLOW_THP, 0);
        }
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static BEFORE_MIMALLOC_INIT: extern "C" fn() = configure_allocator;
