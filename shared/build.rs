//! Embeds the model files shipped in the repository's `models/` (every
//! `*.yaml` there but the scenarios): `shared::file::SHIPPED` lists them
//! without any Rust naming a model (SPEC §8.1).

use std::path::{Path, PathBuf};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("models");
    // A directory: cargo rebuilds when any file in it changes.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    name.ends_with(".yaml") && !name.ends_with(".scenario.yaml")
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("&[\n");
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let abs = f.canonicalize().unwrap_or_else(|_| f.clone());
        out.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            format!("models/{name}"),
            abs.display().to_string()
        ));
    }
    out.push(']');
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("shipped_models.rs");
    std::fs::write(target, out).expect("writes the shipped model list");
}
