//! The OSV schema (the parts used here) and version matching against `affected`.
//! <https://ossf.github.io/osv-schema/>

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::lockfiles::Dependency;
use super::version::Ecosystem;

/// One OSV advisory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Advisory {
    /// `GHSA-…`, `RUSTSEC-…`, `PYSEC-…`, `GO-…`.
    pub id: String,
    /// Other ids (`CVE-…`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// One line.
    #[serde(default)]
    pub summary: Option<String>,
    /// Markdown.
    #[serde(default)]
    pub details: Option<String>,
    /// Set when the advisory was withdrawn (it then matches nothing).
    #[serde(default)]
    pub withdrawn: Option<String>,
    /// The affected packages.
    #[serde(default)]
    pub affected: Vec<Affected>,
    /// Links.
    #[serde(default)]
    pub references: Vec<Reference>,
}

/// `affected[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Affected {
    /// The package.
    #[serde(default)]
    pub package: Option<Package>,
    /// Version ranges.
    #[serde(default)]
    pub ranges: Vec<Range>,
    /// Affected versions, listed.
    #[serde(default)]
    pub versions: Vec<String>,
}

/// `affected[].package`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Package {
    /// `crates.io`, `npm`, `PyPI`, `Go`, …
    pub ecosystem: String,
    /// The package's name in its ecosystem.
    pub name: String,
}

/// `affected[].ranges[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// `SEMVER`, `ECOSYSTEM` or `GIT` (not matched: commits are not versions).
    #[serde(rename = "type")]
    pub kind: String,
    /// `introduced` / `fixed` / `last_affected` / `limit` events.
    #[serde(default)]
    pub events: Vec<Event>,
}

/// One range event (exactly one field is set).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The first affected version (`0`: all before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introduced: Option<String>,
    /// The first fixed version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
    /// The last affected version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_affected: Option<String>,
    /// An upper bound of the range (not used for matching versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// `references[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// `ADVISORY`, `WEB`, `FIX`, …
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// The link.
    pub url: String,
}

/// Why an advisory affects a dependency.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The lowest fixed version above the dependency's, if the advisory names one.
    pub fixed: Option<String>,
}

impl Event {
    fn version(&self) -> Option<&str> {
        self.introduced
            .as_deref()
            .or(self.fixed.as_deref())
            .or(self.last_affected.as_deref())
    }
}

impl Advisory {
    /// The (ecosystem, normalised name) pairs the advisory is about.
    pub fn packages(&self) -> impl Iterator<Item = (Ecosystem, String)> + '_ {
        self.affected.iter().filter_map(|a| {
            let p = a.package.as_ref()?;
            let e = Ecosystem::from_osv(&p.ecosystem)?;
            Some((e, e.normalize_name(&p.name)))
        })
    }

    /// Whether the advisory affects `dep`, and the version that fixes it.
    pub fn affects(&self, dep: &Dependency) -> Option<Hit> {
        if self.withdrawn.is_some() {
            return None;
        }
        let eco = dep.ecosystem;
        let name = eco.normalize_name(&dep.name);
        let mut hit: Option<Hit> = None;
        for a in &self.affected {
            let Some(p) = &a.package else { continue };
            if Ecosystem::from_osv(&p.ecosystem) != Some(eco) || eco.normalize_name(&p.name) != name
            {
                continue;
            }
            let listed = a.versions.iter().any(|v| eco.same(v, &dep.version));
            let mut in_range = false;
            let mut fixed: Option<String> = None;
            for r in &a.ranges {
                if !matches!(r.kind.as_str(), "SEMVER" | "ECOSYSTEM") {
                    continue;
                }
                if range_affects(eco, &r.events, &dep.version) {
                    in_range = true;
                }
                for f in r.events.iter().filter_map(|e| e.fixed.as_deref()) {
                    let above = eco.compare(f, &dep.version) == Some(Ordering::Greater);
                    let lower = fixed
                        .as_deref()
                        .is_none_or(|cur| eco.compare(f, cur) == Some(Ordering::Less));
                    if above && lower {
                        fixed = Some(f.to_owned());
                    }
                }
            }
            if listed || in_range {
                let fixed = fixed.or(hit.and_then(|h| h.fixed));
                hit = Some(Hit { fixed });
            }
        }
        hit
    }
}

/// The OSV evaluation of one range: events in version order; `introduced` at or below the
/// version makes it affected, `fixed` at or below and `last_affected` below make it not.
fn range_affects(eco: Ecosystem, events: &[Event], version: &str) -> bool {
    let mut evs: Vec<&Event> = events
        .iter()
        .filter(|e| e.limit.is_none() && e.version().is_some())
        .filter(|e| e.introduced.as_deref() == Some("0") || parses(eco, e.version()))
        .collect();
    if !parses(eco, Some(version)) {
        return false;
    }
    evs.sort_by(|a, b| {
        let (va, vb) = (a.version().unwrap_or("0"), b.version().unwrap_or("0"));
        match (va, vb) {
            ("0", "0") => Ordering::Equal,
            ("0", _) if a.introduced.is_some() => Ordering::Less,
            (_, "0") if b.introduced.is_some() => Ordering::Greater,
            _ => eco.compare(va, vb).unwrap_or(Ordering::Equal),
        }
    });
    let at_least = |v: &str| v == "0" || eco.compare(version, v) != Some(Ordering::Less);
    let mut affected = false;
    for e in evs {
        if let Some(i) = &e.introduced {
            if at_least(i) {
                affected = true;
            }
        } else if let Some(f) = &e.fixed {
            if at_least(f) {
                affected = false;
            }
        } else if let Some(l) = &e.last_affected
            && eco.compare(version, l) == Some(Ordering::Greater)
        {
            affected = false;
        }
    }
    affected
}

fn parses(eco: Ecosystem, v: Option<&str>) -> bool {
    v.is_some_and(|v| eco.compare(v, v).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: &str, v: &str) -> Event {
        let mut e = Event::default();
        match kind {
            "i" => e.introduced = Some(v.into()),
            "f" => e.fixed = Some(v.into()),
            _ => e.last_affected = Some(v.into()),
        }
        e
    }

    #[test]
    fn ranges_follow_the_osv_evaluation() {
        let e = Ecosystem::CratesIo;
        let r = [
            ev("i", "0"),
            ev("f", "1.2.0"),
            ev("i", "2.0.0"),
            ev("f", "2.1.3"),
        ];
        for (v, want) in [
            ("1.1.9", true),
            ("1.2.0", false),
            ("1.9.0", false),
            ("2.0.0", true),
            ("2.1.2", true),
            ("2.1.3", false),
        ] {
            assert_eq!(range_affects(e, &r, v), want, "{v}");
        }
        let last = [ev("i", "1.0.0"), ev("l", "1.4.0")];
        assert!(range_affects(e, &last, "1.4.0"));
        assert!(!range_affects(e, &last, "1.4.1"));
        assert!(!range_affects(e, &last, "0.9.0"));
        let py = [ev("i", "0"), ev("f", "2.0rc1")];
        assert!(range_affects(Ecosystem::PyPI, &py, "1.9.post2"));
        assert!(!range_affects(Ecosystem::PyPI, &py, "2.0"));
    }
}
