//! OSV advisories from disk: directories of `.json` files (recursively), `.zip` archives
//! (the OSV dumps, `https://osv-vulnerabilities.storage.googleapis.com/<ecosystem>/all.zip`)
//! and `.tar` / `.tar.gz` / `.tgz` archives. Only advisories about a package the workspace
//! locks are kept, so a dump of a whole ecosystem costs one pass and little memory.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use super::model::Advisory;
use super::version::Ecosystem;
use crate::error::{Error, Result};

/// The wanted packages: (ecosystem, normalised name).
pub type Wanted = HashSet<(Ecosystem, String)>;

/// Advisories at `path` about a package in `wanted`; files that are not OSV JSON are
/// skipped (counted in the second value).
pub fn load(path: &Path, wanted: &Wanted) -> Result<(Vec<Advisory>, usize)> {
    let mut out = Vec::new();
    let mut bad = 0;
    let mut take = |bytes: &[u8]| match serde_json::from_slice::<Advisory>(bytes) {
        Ok(a) if a.packages().any(|p| wanted.contains(&p)) => out.push(a),
        Ok(_) => {}
        Err(_) => bad += 1,
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if path.is_dir() {
        let walk = ignore::WalkBuilder::new(path)
            .standard_filters(false)
            .build();
        for e in walk.filter_map(std::result::Result::ok) {
            if e.file_type().is_some_and(|t| t.is_file())
                && e.path().extension().is_some_and(|x| x == "json")
            {
                let bytes = std::fs::read(e.path()).map_err(|err| Error::io(e.path(), err))?;
                take(&bytes);
            }
        }
    } else if name.ends_with(".zip") {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut zip = zip::ZipArchive::new(file).map_err(|e| Error::io(path, e))?;
        for i in 0..zip.len() {
            let mut entry = zip.by_index(i).map_err(|e| Error::io(path, e))?;
            if !entry.is_file() || !entry.name().is_ok_and(|n| n.ends_with(".json")) {
                continue;
            }
            let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(path, e))?;
            take(&bytes);
        }
    } else if name.ends_with(".tar") || name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let reader: Box<dyn Read> = if name.ends_with(".tar") {
            Box::new(file)
        } else {
            Box::new(flate2::read::GzDecoder::new(file))
        };
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries().map_err(|e| Error::io(path, e))? {
            let mut entry = entry.map_err(|e| Error::io(path, e))?;
            let is_json = entry
                .path()
                .ok()
                .is_some_and(|p| p.extension().is_some_and(|x| x == "json"));
            if !entry.header().entry_type().is_file() || !is_json {
                continue;
            }
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(path, e))?;
            take(&bytes);
        }
    } else if name.ends_with(".json") {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        take(&bytes);
    } else if !path.exists() {
        return Err(Error::io(path, "no such file or directory"));
    } else {
        return Err(Error::io(
            path,
            "not a directory, .json, .zip, .tar, .tar.gz or .tgz",
        ));
    }
    Ok((out, bad))
}
