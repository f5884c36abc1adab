//! Ecosystems and their version orders.
//!
//! crates.io, npm and Go versions are SemVer (`semver`; Go's leading `v` is dropped, and a
//! version with fewer than three parts is padded: `1.2` → `1.2.0`). PyPI versions follow
//! PEP 440 (`pep440_rs`: epochs, pre/post/dev releases, local versions).

use std::cmp::Ordering;

/// The ecosystems whose lockfiles are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecosystem {
    /// Rust (`Cargo.lock`).
    CratesIo,
    /// JavaScript (`package-lock.json`).
    Npm,
    /// Python (`poetry.lock`, `requirements.txt`).
    PyPI,
    /// Go (`go.sum`).
    Go,
}

impl Ecosystem {
    /// The OSV name (`crates.io`, `npm`, `PyPI`, `Go`).
    pub fn osv_name(self) -> &'static str {
        match self {
            Ecosystem::CratesIo => "crates.io",
            Ecosystem::Npm => "npm",
            Ecosystem::PyPI => "PyPI",
            Ecosystem::Go => "Go",
        }
    }

    /// The ecosystem of an OSV `package.ecosystem` (suffixes such as `:1.2` ignored).
    pub fn from_osv(name: &str) -> Option<Self> {
        match name.split(':').next().unwrap_or("") {
            "crates.io" => Some(Ecosystem::CratesIo),
            "npm" => Some(Ecosystem::Npm),
            "PyPI" => Some(Ecosystem::PyPI),
            "Go" => Some(Ecosystem::Go),
            _ => None,
        }
    }

    /// A package name as compared: PyPI names normalised (PEP 503: lower case, runs of
    /// `-_.` as one `-`), others as written.
    pub fn normalize_name(self, name: &str) -> String {
        match self {
            Ecosystem::PyPI => {
                let mut out = String::with_capacity(name.len());
                for c in name.trim().chars() {
                    if matches!(c, '-' | '_' | '.') {
                        if !out.ends_with('-') {
                            out.push('-');
                        }
                    } else {
                        out.push(c.to_ascii_lowercase());
                    }
                }
                out
            }
            _ => name.trim().to_owned(),
        }
    }

    /// Compares two versions; `None` when either does not parse.
    pub fn compare(self, a: &str, b: &str) -> Option<Ordering> {
        match self {
            Ecosystem::PyPI => {
                let a: pep440_rs::Version = a.trim().parse().ok()?;
                let b: pep440_rs::Version = b.trim().parse().ok()?;
                Some(a.cmp(&b))
            }
            _ => Some(semver_of(a)?.cmp_precedence(&semver_of(b)?)),
        }
    }

    /// Whether two spellings name the same version (`v1.2.3` = `1.2.3` in Go, `1.0` =
    /// `1.0.0` in PyPI).
    pub fn same(self, a: &str, b: &str) -> bool {
        a.trim() == b.trim() || self.compare(a, b) == Some(Ordering::Equal)
    }
}

fn semver_of(v: &str) -> Option<semver::Version> {
    let v = v.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    if let Ok(p) = semver::Version::parse(v) {
        return Some(p);
    }
    // `1.2` / `1` (and `1.2-beta`): pad the numeric core to three parts.
    let split = v.find(['-', '+']).unwrap_or(v.len());
    let (core, rest) = v.split_at(split);
    let parts = core.split('.').count();
    if parts >= 3 || core.is_empty() {
        return None;
    }
    let padded = format!("{core}{}{rest}", ".0".repeat(3 - parts));
    semver::Version::parse(&padded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_per_ecosystem() {
        let e = Ecosystem::CratesIo;
        assert_eq!(e.compare("0.2.22", "0.2.23"), Some(Ordering::Less));
        assert_eq!(e.compare("1.0.0-alpha", "1.0.0"), Some(Ordering::Less));
        assert_eq!(
            Ecosystem::Go.compare("v1.2", "1.2.0"),
            Some(Ordering::Equal)
        );
        let p = Ecosystem::PyPI;
        assert_eq!(p.compare("2.0rc1", "2.0"), Some(Ordering::Less));
        assert_eq!(p.compare("1.0.post1", "1.0"), Some(Ordering::Greater));
        assert_eq!(p.compare("1!0.1", "2.0"), Some(Ordering::Greater));
        assert!(p.same("1.0", "1.0.0"));
        assert_eq!(e.compare("not a version", "1.0.0"), None);
    }

    #[test]
    fn pypi_names_are_normalised() {
        assert_eq!(
            Ecosystem::PyPI.normalize_name("Django_REST.framework"),
            "django-rest-framework"
        );
        assert_eq!(Ecosystem::Npm.normalize_name("@scope/Pkg"), "@scope/Pkg");
    }
}
