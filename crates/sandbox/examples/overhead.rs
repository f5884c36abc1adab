//! Per-command overhead of the sandbox: `N` spawns of the same command (`true`, then
//! `bash -c true`) bare, under bubblewrap and under Landlock + seccomp, each waited for;
//! prints p50 and p99 of the wall time and the overhead against the bare spawn
//! (docs/benchmarks.md). `cargo run -p trellis-sandbox --example overhead [N]`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use trellis_sandbox::{CommandSpec, Mode, Preset, Sandbox, SandboxConfig, SandboxPolicy};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let home = trellis_sandbox::home_dir();
    let policy = SandboxPolicy::for_worktree(
        dir.path(),
        Preset::WorkspaceWrite,
        &SandboxConfig::default(),
        home.as_deref(),
        trellis_sandbox::trellis_config_dir().as_deref(),
    );
    let env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(k, _)| k == "PATH" || k == "HOME")
        .collect();
    if std::env::var_os("SHOW_ARGV").is_some() {
        let spec = CommandSpec {
            program: "true".into(),
            args: Vec::new(),
            cwd: dir.path().to_path_buf(),
            env: env.clone(),
        };
        let w = Sandbox::new(Mode::Bwrap)
            .unwrap()
            .wrap(&spec, &policy)
            .unwrap();
        let argv: Vec<String> = w
            .command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        println!("{}", argv.join(" "));
        return;
    }
    println!("{n} runs each; wall time of spawn + wait\n");
    println!("| command | sandbox | p50 | p99 | p50 overhead | p99 overhead |");
    println!("|---|---|---|---|---|---|");
    for (program, args) in [("true", vec![]), ("bash", vec!["-c", "true"])] {
        let spec = CommandSpec {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            cwd: dir.path().to_path_buf(),
            env: env.clone(),
        };
        let mut bare = None;
        let mut no_pids = policy.clone();
        no_pids.pids_max = 0;
        for (name, sandbox, policy) in [
            ("none (bare spawn)", Sandbox::off(), &policy),
            ("bwrap", Sandbox::new(Mode::Bwrap).unwrap(), &policy),
            (
                "bwrap, no pids cgroup",
                Sandbox::new(Mode::Bwrap).unwrap(),
                &no_pids,
            ),
            ("landlock", Sandbox::new(Mode::Landlock).unwrap(), &policy),
            (
                "landlock, no pids cgroup",
                Sandbox::new(Mode::Landlock).unwrap(),
                &no_pids,
            ),
        ] {
            // Warm up (the preflight, page cache).
            for _ in 0..5 {
                let mut w = sandbox.wrap(&spec, policy).unwrap();
                w.command.stdout(Stdio::null()).status().unwrap();
            }
            let mut times = Vec::with_capacity(n);
            for _ in 0..n {
                let started = Instant::now();
                let mut w = sandbox.wrap(&spec, policy).unwrap();
                let status = w.command.stdout(Stdio::null()).status().unwrap();
                drop(w.guard);
                times.push(started.elapsed());
                assert!(status.success());
            }
            times.sort();
            let (p50, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
            let (o50, o99) = match bare {
                None => {
                    bare = Some((p50, p99));
                    ("—".to_owned(), "—".to_owned())
                }
                Some((b50, b99)) => (
                    format!("{:.2} ms", (p50.as_secs_f64() - b50.as_secs_f64()) * 1e3),
                    format!("{:.2} ms", (p99.as_secs_f64() - b99.as_secs_f64()) * 1e3),
                ),
            };
            println!(
                "| `{program} {}` | {name} | {:.2} ms | {:.2} ms | {o50} | {o99} |",
                args.join(" "),
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3,
            );
        }
    }
}
