//! The access token of Trellis's local HTTP servers (`trellis serve`, `trellis mcp --http`,
//! `trellis models serve`) and the request checks they share.
//!
//! A token is 32 random bytes from the OS generator, hex, kept in a file only its owner can
//! read ([`TokenFile`]) and compared in constant time ([`Token::matches`]). A loopback server
//! also refuses requests whose `Host` is not one of its own names ([`host_allowed`]: DNS
//! rebinding) and, on state-changing requests, an `Origin` of another site
//! ([`origin_allowed`]: a web page in the user's browser). See `docs/security.md`.

use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use http::{HeaderMap, header};
use rand::RngCore;
use subtle::ConstantTimeEq;

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Names the file and what to do.
    #[error("{0}")]
    Token(String),
}

/// The access token (never printed by `Debug`).
#[derive(Clone)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// A token with this text.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// A fresh random token: 32 bytes from the OS generator, hex.
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The text (to build the login URL).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison with what a client sent.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        // `ct_eq` on slices of different lengths returns false without comparing; the
        // length of the token is not a secret.
        a.ct_eq(b).into()
    }
}

/// Where the token lives, and whether this start created it.
#[derive(Debug)]
pub struct TokenFile {
    /// The file.
    pub path: PathBuf,
    /// The token.
    pub token: Token,
    /// Created now (show it once).
    pub created: bool,
}

impl TokenFile {
    /// The default location of `trellis serve`'s token:
    /// `$XDG_CONFIG_HOME/trellis/serve-token`, else `$HOME/.config/trellis/serve-token`.
    pub fn default_path() -> Result<PathBuf, Error> {
        Self::config_path("serve-token")
    }

    /// `$XDG_CONFIG_HOME/trellis/NAME`, else `$HOME/.config/trellis/NAME`.
    pub fn config_path(name: &str) -> Result<PathBuf, Error> {
        let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(home) => PathBuf::from(home).join(".config"),
                None => {
                    return Err(Error::Token(
                        "neither XDG_CONFIG_HOME nor HOME is set: pass --token-file PATH".into(),
                    ));
                }
            },
        };
        Ok(base.join("trellis").join(name))
    }

    /// Reads the token at `path`, or creates one there (mode 0600, directory 0700).
    pub fn load_or_create(path: &Path) -> Result<Self, Error> {
        let fail = |what: &str, e: std::io::Error| {
            Error::Token(format!("token file {}: {what}: {e}", path.display()))
        };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                check_private(path)?;
                let text = text.trim();
                if text.len() < 16 {
                    return Err(Error::Token(format!(
                        "token file {} holds a token shorter than 16 characters; delete it to \
                         get a new one",
                        path.display()
                    )));
                }
                return Ok(Self {
                    path: path.to_owned(),
                    token: Token::new(text),
                    created: false,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail("cannot read it", e)),
        }
        if let Some(dir) = path.parent() {
            create_private_dir(dir).map_err(|e| fail("cannot create its directory", e))?;
        }
        let token = Token::random();
        let mut file = open_new_private(path).map_err(|e| fail("cannot create it", e))?;
        file.write_all(format!("{}\n", token.expose()).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| fail("cannot write it", e))?;
        Ok(Self {
            path: path.to_owned(),
            token,
            created: true,
        })
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn open_new_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn open_new_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Refuses a token file other users can read.
#[cfg(unix)]
fn check_private(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| Error::Token(format!("token file {}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(Error::Token(format!(
            "token file {} is readable by other users (mode {:o}); run `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_: &Path) -> Result<(), Error> {
    Ok(())
}

/// The `Host` values of a loopback server on `port`.
pub fn loopback_hosts(port: u16) -> Vec<String> {
    vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ]
}

/// The `Host` values a server bound to `bound` answers to: its loopback names, the bound
/// address itself when it is not loopback, and `extra` (names it is reached by).
pub fn served_hosts(bound: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut hosts = loopback_hosts(bound.port());
    if !bound.ip().is_loopback() {
        hosts.push(bound.to_string());
    }
    hosts.extend(extra.iter().cloned());
    hosts
}

/// Whether `host` (a `Host` header value) is one of `allowed`, ignoring case.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    allowed.iter().any(|h| h.eq_ignore_ascii_case(host))
}

/// `Origin` is `scheme://host[:port]`: allowed when its host part is an allowed host.
pub fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(host) if !host.contains('/') => host_allowed(allowed, host),
        _ => false,
    }
}

/// The token of an `Authorization: Bearer …` header, if there is one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        let t = Token::new("abcdef0123456789");
        assert!(t.matches("abcdef0123456789"));
        assert!(!t.matches("abcdef012345678"));
        assert!(!t.matches("abcdef01234567890"));
        assert!(!t.matches(""));
        assert_eq!(Token::random().expose().len(), 64);
        assert_ne!(Token::random().expose(), Token::random().expose());
        assert_eq!(format!("{t:?}"), "Token(…)");
    }

    #[cfg(unix)]
    #[test]
    fn token_file_is_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfg/trellis/serve-token");
        let first = TokenFile::load_or_create(&path).unwrap();
        assert!(first.created);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = TokenFile::load_or_create(&path).unwrap();
        assert!(!again.created);
        assert_eq!(again.token.expose(), first.token.expose());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = TokenFile::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
    }

    #[test]
    fn hosts_and_origins() {
        let allowed = loopback_hosts(8421);
        assert!(host_allowed(&allowed, "LOCALHOST:8421"));
        assert!(!host_allowed(&allowed, "evil.example:8421"));
        assert!(!host_allowed(&allowed, "127.0.0.1:8420"));
        assert!(origin_allowed(&allowed, "http://127.0.0.1:8421"));
        assert!(!origin_allowed(&allowed, "http://127.0.0.1:8421/x"));
        assert!(!origin_allowed(&allowed, "https://evil.example"));
        assert!(!origin_allowed(&allowed, "null"));
        let lan = served_hosts(
            "192.168.1.5:8421".parse().unwrap(),
            &["box.lan:8421".into()],
        );
        assert!(host_allowed(&lan, "192.168.1.5:8421") && host_allowed(&lan, "box.lan:8421"));
        assert!(host_allowed(&lan, "localhost:8421"));
        assert_eq!(
            served_hosts("127.0.0.1:80".parse().unwrap(), &[]),
            loopback_hosts(80)
        );
    }

    #[test]
    fn bearer_tokens() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer  abc ".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }
}
