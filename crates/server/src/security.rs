//! The access token, and the checks every request passes: `Host` allow-list (DNS
//! rebinding), `Origin` on state-changing requests and WebSocket upgrades (cross-site
//! requests), then the token (bearer header or cookie).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::{AppState, Error, error::ApiError};

/// The name of the session cookie.
pub const COOKIE: &str = "trellis_token";

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
    /// The default location: `$XDG_CONFIG_HOME/trellis/serve-token`, else
    /// `$HOME/.config/trellis/serve-token`.
    pub fn default_path() -> Result<PathBuf, Error> {
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
        Ok(base.join("trellis").join("serve-token"))
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

fn host_allowed(state: &AppState, host: &str) -> bool {
    state
        .0
        .settings
        .allowed_hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(host))
}

/// `Origin` is `scheme://host[:port]`: allowed when its host part is an allowed host.
fn origin_allowed(state: &AppState, origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(host) if !host.contains('/') => host_allowed(state, host),
        _ => false,
    }
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Routes anyone on an allowed host may call without the token: health, the API document,
/// login, and the web UI's page and bundles (they hold no data; the app then calls the API,
/// which needs the token).
fn is_public(method: &Method, path: &str) -> bool {
    if *method != Method::GET {
        return false;
    }
    match path {
        "/api/health" | "/api/openapi.json" => true,
        p => !(p.starts_with("/api/") || p.starts_with("/ws/") || p == "/api"),
    }
}

/// The checks, in order: `Host`, `Origin`, token.
pub(crate) async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(&state, host) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "Host `{host}` is not served here (allowed: {}); add it with --allow-host",
                state.0.settings.allowed_hosts.join(", ")
            ),
        )
        .into_response();
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        || is_upgrade(headers);
    if changes_state {
        // Browsers always send Origin on these; programs (curl, SDKs) send none.
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !origin_allowed(&state, origin) {
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!("cross-origin request from `{origin}` refused"),
                )
                .into_response();
            }
        }
        if headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == "cross-site")
        {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "cross-site request refused",
            )
            .into_response();
        }
    }
    if !is_public(req.method(), req.uri().path()) && !authorized(&state, headers) {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong access token: send `Authorization: Bearer <token>` (the token is \
             in the file `trellis serve` printed at start), or open the login URL",
        )
        .into_response();
    }
    next.run(req).await
}

fn authorized(state: &AppState, headers: &HeaderMap) -> bool {
    let token = &state.0.settings.token;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(given) = bearer {
        return token.matches(given.trim());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| k == COOKIE && token.matches(v))
}

#[derive(serde::Deserialize)]
pub(crate) struct Login {
    token: Option<String>,
}

/// `GET /login?token=…`: sets the HttpOnly, SameSite=Strict cookie and goes to `/`.
pub(crate) async fn login(State(state): State<AppState>, Query(q): Query<Login>) -> Response {
    match q.token {
        Some(t) if state.0.settings.token.matches(&t) => {
            let cookie = format!("{COOKIE}={t}; HttpOnly; SameSite=Strict; Path=/");
            let mut res = Redirect::to("/").into_response();
            if let Ok(v) = header::HeaderValue::from_str(&cookie) {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res.headers_mut().insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-store"),
            );
            res
        }
        _ => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong or missing token in the login URL",
        )
        .into_response(),
    }
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
}
