//! Embeds the models shipped in the repository's `models/`: every `*.yaml`
//! there as `shared::file::SHIPPED`, and their `*.scenario.yaml` demos as
//! `shared::file::SHIPPED_SCENARIOS`, and the one-line `models/default` as
//! `shared::models::DEFAULT_MODEL`, without any Rust naming a model
//! (SPEC §8.1). `models/examples/` is not shipped.

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
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let (scenarios, models): (Vec<PathBuf>, Vec<PathBuf>) = files
        .into_iter()
        .partition(|p| p.to_string_lossy().ends_with(".scenario.yaml"));
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).to_path_buf();
    // `models/default`: one line, the model commands and the stack use
    // when none is named (`shared::models::DEFAULT_MODEL`).
    let default = std::fs::read_to_string(dir.join("default")).unwrap_or_default();
    let default = default.trim();
    assert!(
        models
            .iter()
            .any(|p| p.file_stem().is_some_and(|s| s == default)),
        "models/default names `{default}`, which is no models/NAME.yaml"
    );
    std::fs::write(out.join("default_model.rs"), format!("{default:?}"))
        .expect("writes the default model");
    for (list, target) in [
        (&models, "shipped_models.rs"),
        (&scenarios, "shipped_scenarios.rs"),
    ] {
        std::fs::write(out.join(target), embed(list)).expect("writes the shipped list");
    }
}

/// `&[("models/NAME", include_str!(ABSOLUTE PATH)), ...]`
fn embed(files: &[PathBuf]) -> String {
    let mut out = String::from("&[\n");
    for f in files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let abs = f.canonicalize().unwrap_or_else(|_| f.clone());
        out.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            format!("models/{name}"),
            abs.display().to_string()
        ));
    }
    out.push(']');
    out
}
