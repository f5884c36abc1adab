//! One configuration layer (a file or a `-c` argument) and the key-by-key merge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use crate::{Error, Origin, Result};

/// A parsed layer with the origin of every dotted key it sets.
pub(crate) struct Layer {
    pub(crate) file: Option<PathBuf>,
    pub(crate) table: toml::Table,
    pub(crate) origins: BTreeMap<String, Origin>,
}

impl Layer {
    pub(crate) fn from_file(path: &Path, text: &str) -> Result<Self> {
        let table: toml::Table = toml::from_str(text).map_err(|e| parse_error(path, text, &e))?;
        let mut origins = BTreeMap::new();
        // The spanned parse only supplies line numbers; the typed parse above already
        // succeeded, so a failure here cannot happen for valid TOML.
        if let Ok(spanned) = DeTable::parse(text) {
            let lines = LineIndex::new(text);
            record_origins(spanned.get_ref(), "", path, &lines, &mut origins);
        }
        Ok(Self {
            file: Some(path.to_path_buf()),
            table,
            origins,
        })
    }

    pub(crate) fn from_override(arg: &str) -> Result<Self> {
        let bad = |message: &str| Error::Override {
            arg: arg.to_string(),
            message: message.to_string(),
        };
        let (key, raw) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected key=value"))?;
        let parts: Vec<&str> = key.trim().split('.').map(str::trim).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(bad("empty key segment"));
        }
        let raw = raw.trim();
        // TOML value syntax first (`3`, `true`, `"x"`, `[1, 2]`, `{ a = 1 }`); anything that
        // does not parse is a bare string, so `-c roles.coder=fast` works unquoted.
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.to_string()));
        let mut origins = BTreeMap::new();
        let mut prefix = String::new();
        for p in &parts {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(p);
            origins.insert(prefix.clone(), Origin::Override(arg.to_string()));
        }
        let mut node = value;
        for p in parts.iter().rev() {
            let mut t = toml::Table::new();
            t.insert((*p).to_string(), node);
            node = toml::Value::Table(t);
        }
        let table = match node {
            toml::Value::Table(t) => t,
            _ => return Err(bad("empty key")),
        };
        Ok(Self {
            file: None,
            table,
            origins,
        })
    }
}

/// Merges `layer` over `into`: tables merge recursively, other values replace.
pub(crate) fn merge(into: &mut toml::Table, origins: &mut BTreeMap<String, Origin>, layer: Layer) {
    let mut table = layer.table;
    let mut layer_origins = layer.origins;
    // A list section (`[[hooks]]`) adds the layer's entries after the earlier layers'; their
    // origins are renumbered to the merged positions.
    for name in crate::LIST_SECTIONS {
        let Some(toml::Value::Array(earlier)) = into.get_mut(*name) else {
            continue;
        };
        if !table.get(*name).is_some_and(toml::Value::is_array) {
            continue;
        }
        let Some(toml::Value::Array(later)) = table.remove(*name) else {
            continue;
        };
        let offset = earlier.len();
        earlier.extend(later);
        let prefix = format!("{name}[");
        layer_origins = layer_origins
            .into_iter()
            .map(
                |(k, o)| match k.strip_prefix(&prefix).and_then(|r| r.split_once(']')) {
                    Some((i, rest)) => match i.parse::<usize>() {
                        Ok(i) => (format!("{prefix}{}]{rest}", i + offset), o),
                        Err(_) => (k, o),
                    },
                    None => (k, o),
                },
            )
            .collect();
    }
    merge_tables(into, table);
    origins.extend(layer_origins);
}

fn merge_tables(into: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge_tables(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

fn record_origins(
    table: &DeTable<'_>,
    prefix: &str,
    path: &Path,
    lines: &LineIndex,
    out: &mut BTreeMap<String, Origin>,
) {
    for (key, value) in table {
        let dotted = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        out.insert(
            dotted.clone(),
            Origin::File {
                path: path.to_path_buf(),
                line: lines.line(key.span().start),
            },
        );
        match value.get_ref() {
            DeValue::Table(t) => record_origins(t, &dotted, path, lines, out),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(t) = item.get_ref() {
                        record_origins(t, &format!("{dotted}[{i}]"), path, lines, out);
                    }
                }
            }
            _ => {}
        }
    }
}

fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> Error {
    let (line, col) = match e.span() {
        Some(span) => {
            let lines = LineIndex::new(text);
            let line = lines.line(span.start);
            let col = span.start - lines.starts[line - 1] + 1;
            (line, col)
        }
        None => (1, 1),
    };
    Error::Parse {
        origin: format!("{}:{line}:{col}", path.display()),
        message: e.message().trim().to_string(),
    }
}

/// Byte offset → 1-based line.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { starts }
    }

    fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}
