//! The `[store]` section of the configuration: where a workspace's records live.
//!
//! Unset, the records live in the workspace's SQLite file (`.trellis/trellis.db`). With
//! `url`, they live on a PostgreSQL server (feature `postgres`), shared by every worker and
//! server of a team. The password never sits in the files: `password_env` names the
//! environment variable that holds it (as model profiles do with `api_key_env`).

use serde::Deserialize;

use crate::{Error, Result};

/// The `[store]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// A PostgreSQL server's URL, `postgres://USER@HOST:PORT/DATABASE`; unset: the
    /// workspace's SQLite file.
    pub url: Option<String>,
    /// The environment variable holding the server's password.
    pub password_env: Option<String>,
    /// Runs execute on `trellis worker` processes (team scale; needs `url`): every command
    /// of the workspace that starts, resumes or steers a run queues it for the workers
    /// instead of executing it in its own process.
    #[serde(default)]
    pub workers: bool,
}

impl StoreConfig {
    /// The password from the environment variable `password_env` names (`None` when no
    /// variable is named); an unset or empty variable is an error naming it.
    pub fn password(&self) -> Result<Option<String>> {
        self.password_from(|var| std::env::var(var).ok())
    }

    /// [`StoreConfig::password`], looking variables up with `lookup`.
    pub fn password_from(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Option<String>> {
        let Some(var) = &self.password_env else {
            return Ok(None);
        };
        match lookup(var) {
            Some(p) if !p.is_empty() => Ok(Some(p)),
            _ => Err(Error::PasswordEnv { var: var.clone() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> std::result::Result<StoreConfig, toml::de::Error> {
        toml::from_str(toml)
    }

    #[test]
    fn the_section_reads_url_and_password_env_and_refuses_other_keys() {
        let c = config("url = \"postgres://trellis@db:5432/trellis\"\npassword_env = \"PG_PW\"")
            .unwrap_or_default();
        assert_eq!(c.url.as_deref(), Some("postgres://trellis@db:5432/trellis"));
        let found = c.password_from(|v| (v == "PG_PW").then(|| "s3cret".to_owned()));
        assert_eq!(found.ok().flatten().as_deref(), Some("s3cret"));
        assert!(config("password = \"inline\"").is_err());
        assert_eq!(StoreConfig::default().password().ok(), Some(None));
    }

    #[test]
    fn a_missing_or_empty_variable_is_named_and_its_value_never_printed() {
        let c = StoreConfig {
            password_env: Some("PG_PW".into()),
            ..StoreConfig::default()
        };
        for lookup in [None, Some(String::new())] {
            let e = c.password_from(|_| lookup.clone());
            let message = e.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains("password_env = \"PG_PW\""), "{message}");
        }
    }
}
