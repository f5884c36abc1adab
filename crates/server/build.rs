//! Embeds the built web UI (`web/dist`, made by `scripts/setup` or `npm run build` in `web/`)
//! into the server: `$OUT_DIR/web_assets.rs` lists every file with `include_bytes!`. Without
//! a build the list is empty and the server answers `/` with how to build it.
//! `TRELLIS_WEB_DIST` points at another build directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn files(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue; // the build stamp of scripts/setup
        }
        let path = e.path();
        if path.is_dir() {
            files(&path, base, out);
        } else if let Ok(rel) = path.strip_prefix(base) {
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((rel, path));
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=TRELLIS_WEB_DIST");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dist = std::env::var_os("TRELLIS_WEB_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../web/dist"));
    // Cargo scans the directory recursively; while it does not exist, this script runs on
    // every build (cheap), so a first build of the UI is noticed.
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut found = Vec::new();
    if dist.join("index.html").is_file() {
        files(&dist, &dist, &mut found);
    }
    let mut code = String::from("/// The built web UI: (path under `web/dist`, bytes).\n");
    code.push_str("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for (rel, path) in &found {
        let _ = writeln!(
            code,
            "    ({rel:?}, include_bytes!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("web_assets.rs");
    // Unchanged content keeps its mtime, so the crate is not rebuilt for nothing.
    if std::fs::read_to_string(&out).ok().as_deref() != Some(code.as_str())
        && let Err(e) = std::fs::write(&out, code)
    {
        println!("cargo:warning=cannot write {}: {e}", out.display());
    }
}
