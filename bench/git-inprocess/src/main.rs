//! How long a run's worktree takes to create: Trellis's `RunWorktree::create` (git
//! processes: the snapshot of the working state, then `git worktree add`) against the same
//! steps in process with libgit2 (`git2`): the working state added to an in-memory copy of
//! the index, its tree written, committed on HEAD, a branch, `Repository::worktree`.
//!
//! ```sh
//! CARGO_TARGET_DIR=/tmp/git-inprocess cargo run --release \
//!     --manifest-path bench/git-inprocess/Cargo.toml -- REPO [N]
//! ```
//!
//! REPO (a repository's top-level directory) is cloned to a temporary directory first
//! (nothing of it is changed) and gets an untracked file; N creations of
//! each kind (default 30), alternating, each removed again untimed. Prints per creation:
//! wall time and CPU (this process + its reaped children), median and p90.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn cpu() -> Duration {
    let mut total = Duration::ZERO;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage writes into the zeroed struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut u) };
        for t in [u.ru_utime, u.ru_stime] {
            total += Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
        }
    }
    total
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .current_dir(dir)
        .args(args)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// The same steps in process: snapshot (working state into an in-memory index, its tree,
/// a commit on HEAD unless equal), the branch, the worktree.
fn inprocess(repo: &Path, name: &str) -> PathBuf {
    let r = git2::Repository::open(repo).unwrap();
    let mut index = r.index().unwrap();
    index
        .add_all(["."], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["."], None).unwrap();
    let tree_id = index.write_tree().unwrap();
    let head = r.head().unwrap().peel_to_commit().unwrap();
    let base = if head.tree_id() == tree_id {
        head
    } else {
        let sig = git2::Signature::now("Trellis", "trellis@localhost").unwrap();
        let tree = r.find_tree(tree_id).unwrap();
        let id = r
            .commit(None, &sig, &sig, "trellis: working state", &tree, &[&head])
            .unwrap();
        r.find_commit(id).unwrap()
    };
    let branch = r
        .branch(&format!("trellis/run-{name}"), &base, false)
        .unwrap();
    let path = repo.join(".trellis/worktrees").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(branch.get()));
    r.worktree(name, &path, Some(&opts)).unwrap();
    path
}

fn stats(label: &str, mut wall: Vec<Duration>, mut cpu: Vec<Duration>) {
    wall.sort();
    cpu.sort();
    let q =
        |v: &[Duration], p: f64| v[((v.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    println!(
        "| {label} | {} | {:.1} / {:.1} | {:.1} / {:.1} |",
        wall.len(),
        q(&wall, 0.5),
        q(&wall, 0.9),
        q(&cpu, 0.5),
        q(&cpu, 0.9)
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let src = PathBuf::from(args.next().expect("usage: git-inprocess REPO [N]"));
    let n: usize = args.next().map_or(30, |v| v.parse().unwrap());
    let tmp = std::env::temp_dir().join(format!("git-inprocess-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    git(&tmp, &["clone", "--quiet", src.to_str().unwrap(), "repo"]);
    let repo = tmp.join("repo").canonicalize().unwrap();
    // An uncommitted change and an untracked file, as a user's working state has.
    std::fs::write(repo.join("UNTRACKED.md"), "new\n").unwrap();
    let files = Command::new("git")
        .current_dir(&repo)
        .args(["ls-files"])
        .output()
        .unwrap();
    let tracked = String::from_utf8_lossy(&files.stdout).lines().count();
    let (mut cli_wall, mut cli_cpu, mut ip_wall, mut ip_cpu) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let run = trellis_protocol::RunId::new();
        let (c0, t0) = (cpu(), Instant::now());
        let wt = trellis_tools::worktree::RunWorktree::create(&repo, &run).unwrap();
        cli_wall.push(t0.elapsed());
        cli_cpu.push(cpu() - c0);
        wt.prune().unwrap();

        let name = format!("ip{i}");
        let (c0, t0) = (cpu(), Instant::now());
        let path = inprocess(&repo, &name);
        ip_wall.push(t0.elapsed());
        ip_cpu.push(cpu() - c0);
        git(
            &repo,
            &["worktree", "remove", "--force", path.to_str().unwrap()],
        );
        git(
            &repo,
            &["branch", "-q", "-D", &format!("trellis/run-{name}")],
        );
    }
    println!(
        "{} ({tracked} tracked files, an untracked one), {n} creations each:\n",
        src.display()
    );
    println!(
        "| worktree creation | n | wall ms, median / p90 | CPU ms (self + children), median / p90 |"
    );
    println!("|---|---|---|---|");
    stats("RunWorktree::create (git processes)", cli_wall, cli_cpu);
    stats("in process (git2 / libgit2)", ip_wall, ip_cpu);
    let _ = std::fs::remove_dir_all(&tmp);
}
