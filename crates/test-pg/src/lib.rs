//! A throwaway PostgreSQL cluster on loopback, for tests and benchmarks.
//!
//! [`Cluster::start`] runs Debian's `initdb` into a temporary directory and starts the
//! server with `pg_ctl` on `127.0.0.1` and a free port, its Unix socket inside that
//! directory; dropping the [`Cluster`] stops it (`pg_ctl stop -m immediate`) and removes
//! the directory. [`Cluster::database`] creates a fresh database and answers a [`Database`]
//! whose [`url`](Database::url) a client connects to; it is dropped with the database.
//!
//! [`Cluster::shared`] reuses the cluster `scripts/check` started for the whole suite
//! (named by the environment variable [`SHARED_ENV`]) and starts a private one otherwise, so
//! a test run by hand needs nothing but the server binaries (`scripts/setup` installs
//! Debian's `postgresql`).
//!
//! The server refuses to run as root: as root, every server command runs as the
//! `postgres` user the Debian package creates (`runuser -u postgres`), and the directory is
//! handed to that user. Host connections need the password ([`PASSWORD`], SCRAM); the
//! socket trusts its owner, which is how [`Cluster::psql`] administers.
//!
//! Why not a crate: the embedded-Postgres crates download server binaries at build or run
//! time (not reachable here) or bundle them; this drives the system's binaries in a few
//! dozen lines of std.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// The environment variable naming a running cluster to share: its socket directory, port
/// and bin directory, `DIR:PORT:BINDIR` (what `trellis-test-pg start` prints).
pub const SHARED_ENV: &str = "TRELLIS_TEST_PG";
/// The superuser every test cluster has.
pub const USER: &str = "trellis";
/// Its password, for host (TCP) connections.
pub const PASSWORD: &str = "trellis-test";

/// How the cluster commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `fsync = off`, `synchronous_commit = off`: fast, for tests (a crash of the machine
    /// may lose the cluster, which is thrown away anyway).
    #[default]
    Fast,
    /// The server's defaults (fsync at every commit), for benchmarks that compare commit
    /// costs with SQLite's `synchronous = FULL`.
    Durable,
}

/// A running PostgreSQL cluster on loopback.
#[derive(Debug)]
pub struct Cluster {
    socket_dir: PathBuf,
    port: u16,
    bin: PathBuf,
    /// The temporary directory of a cluster this process started (`None` when shared).
    own: Option<tempfile::TempDir>,
}

/// A database of a [`Cluster`], dropped with this value.
#[derive(Debug)]
pub struct Database<'a> {
    cluster: &'a Cluster,
    name: String,
}

impl Cluster {
    /// Starts a private cluster (see the crate docs); panics naming what is missing or what
    /// the server said, since a test cannot go on without it.
    pub fn start(durability: Durability) -> Cluster {
        let bin = bindir();
        let dir = tempfile::Builder::new()
            .prefix("trellis-pg-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
        let data = dir.path().join("data");
        if as_root() {
            let owner = run(Command::new("id").args(["-u", "postgres"]));
            let uid: u32 = String::from_utf8_lossy(&owner.stdout)
                .trim()
                .parse()
                .unwrap_or_else(|_| {
                    panic!("no `postgres` user to run the server as: run scripts/setup")
                });
            std::os::unix::fs::chown(dir.path(), Some(uid), None).unwrap_or_else(|e| {
                panic!("cannot hand {} to postgres: {e}", dir.path().display())
            });
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", pwfile.display()));
        if as_root() {
            let _ = run(Command::new("chown").arg("postgres").arg(&pwfile));
        }
        let initdb = server_command(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "-E", "UTF8", "--locale=C", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output();
        check("initdb", initdb);
        let mut last = String::new();
        // A free port can be taken between probing and binding: try a few.
        for _ in 0..5 {
            let port = free_port();
            let settings = format!(
                "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={} {}",
                dir.path().display(),
                match durability {
                    Durability::Fast =>
                        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                    Durability::Durable => "",
                }
            );
            let out = server_command(&bin, "pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o", &settings, "start"])
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    return Cluster {
                        socket_dir: dir.path().to_owned(),
                        port,
                        bin,
                        own: Some(dir),
                    };
                }
                Ok(o) => {
                    last = format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stderr),
                        std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default()
                    );
                }
                Err(e) => last = e.to_string(),
            }
        }
        panic!("the test PostgreSQL server did not start: {last}")
    }

    /// The cluster named by [`SHARED_ENV`] when set, else a private one ([`Durability::Fast`]).
    pub fn shared() -> Cluster {
        let Ok(spec) = std::env::var(SHARED_ENV) else {
            return Self::start(Durability::Fast);
        };
        Self::parse(&spec)
    }

    fn parse(spec: &str) -> Cluster {
        let mut parts = spec.splitn(3, ':');
        let (Some(dir), Some(port), Some(bin)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("{SHARED_ENV}={spec}: expected DIR:PORT:BINDIR");
        };
        let port = port
            .parse()
            .unwrap_or_else(|_| panic!("{SHARED_ENV}={spec}: the port is not a number"));
        Cluster {
            socket_dir: dir.into(),
            port,
            bin: bin.into(),
            own: None,
        }
    }

    /// Leaves a cluster this process started running after this value is gone, and answers
    /// its [`SHARED_ENV`] value: for a whole test suite to share (`trellis-test-pg start`);
    /// [`Cluster::stop_shared`] stops it.
    pub fn detach(mut self) -> String {
        let spec = self.shared_spec();
        if let Some(dir) = self.own.take() {
            let _kept = dir.keep();
        }
        spec
    }

    /// Stops the cluster a [`SHARED_ENV`] value names and removes its directory (what
    /// [`Cluster::detach`] left running).
    pub fn stop_shared(spec: &str) {
        let cluster = Self::parse(spec);
        let _ = server_command(&cluster.bin, "pg_ctl")
            .arg("-D")
            .arg(cluster.socket_dir.join("data"))
            .args(["-m", "fast", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&cluster.socket_dir);
    }

    /// The TCP port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name` for the superuser, over TCP with the password.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{name}",
            self.port
        )
    }

    /// The environment value that shares this cluster ([`SHARED_ENV`]).
    pub fn shared_spec(&self) -> String {
        format!(
            "{}:{}:{}",
            self.socket_dir.display(),
            self.port,
            self.bin.display()
        )
    }

    /// Creates a database with a fresh name (`t_<pid>_<n>`).
    pub fn database(&self) -> Database<'_> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        Database {
            cluster: self,
            name,
        }
    }

    /// Runs `sql` in database `db` as the superuser over the socket and answers psql's
    /// unaligned output; panics with psql's error.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .arg("-h")
            .arg(&self.socket_dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                db,
                "-c",
                sql,
            ])
            .output();
        String::from_utf8_lossy(&check("psql", out).stdout).into_owned()
    }

    /// Ends every connection to database `db` but this one's (`pg_terminate_backend`),
    /// answering how many were ended: a client cut off from the database.
    pub fn terminate_connections(&self, db: &str) -> usize {
        self.psql(
            "postgres",
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = '{db}' AND pid <> pg_backend_pid()"
            ),
        )
        .trim()
        .parse()
        .unwrap_or(0)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.own {
            let _ = server_command(&self.bin, "pg_ctl")
                .arg("-D")
                .arg(dir.path().join("data"))
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
    }
}

impl Database<'_> {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its URL for the superuser, over TCP with the password.
    pub fn url(&self) -> String {
        self.cluster.url(&self.name)
    }

    /// Runs `sql` in it ([`Cluster::psql`]).
    pub fn psql(&self, sql: &str) -> String {
        self.cluster.psql(&self.name, sql)
    }
}

impl Drop for Database<'_> {
    fn drop(&mut self) {
        let _ = Command::new(self.cluster.bin.join("psql"))
            .args(["-X", "-q"])
            .arg("-h")
            .arg(&self.cluster.socket_dir)
            .args([
                "-p",
                &self.cluster.port.to_string(),
                "-U",
                USER,
                "-d",
                "postgres",
            ])
            .args([
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// The server binaries: `TRELLIS_PG_BINDIR`, else the newest `/usr/lib/postgresql/*/bin`
/// (Debian), else the directory of `initdb` on the `PATH`.
pub fn bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TRELLIS_PG_BINDIR") {
        return dir.into();
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|d| d.join("initdb").exists())
        .unwrap_or_else(|| {
            panic!(
                "no PostgreSQL server binaries (initdb): run scripts/setup (Debian's postgresql)"
            )
        })
}

fn as_root() -> bool {
    std::env::var("USER").is_ok_and(|u| u == "root")
        || Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `bin/name`, run as `postgres` when this process is root.
fn server_command(bin: &Path, name: &str) -> Command {
    if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(name));
        c
    } else {
        Command::new(bin.join(name))
    }
}

fn run(c: &mut Command) -> Output {
    let what = format!("{c:?}");
    check(&what, c.output())
}

fn check(what: &str, out: std::io::Result<Output>) -> Output {
    match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run {what}: {e}"),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}
