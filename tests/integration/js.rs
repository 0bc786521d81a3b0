//! The real JavaScript libraries the tests check jobstream against
//! (`tests/js/package.json`, pinned by its lockfile): OneTable and ElectroDB
//! for `import`, mermaid under jsdom for `graph`. `scripts/test` installs
//! them with `npm ci`; a test run without them installs them once here.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

pub fn js_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/js"))
}

/// `npm ci` in tests/js unless every package is there (once per process).
pub fn ensure_installed() {
    static DONE: Mutex<bool> = Mutex::new(false);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if *done {
        return;
    }
    let modules = js_dir().join("node_modules");
    let installed = [
        "dynamodb-onetable",
        "electrodb",
        "mermaid",
        "jsdom",
        "@aws-sdk/client-dynamodb",
        "@aws-sdk/lib-dynamodb",
    ]
    .iter()
    .all(|p| modules.join(p).join("package.json").exists());
    if !installed {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(js_dir())
            .stdout(Stdio::null())
            .status()
            .expect("npm runs (Node.js and npm on PATH)");
        assert!(status.success(), "npm ci in tests/js");
    }
    *done = true;
}

/// `node tests/js/SCRIPT ARGS...`, its output (asserted successful).
pub fn node(script: &str, args: &[&str]) -> Output {
    ensure_installed();
    let out = Command::new("node")
        .arg(js_dir().join(script))
        .args(args)
        .current_dir(js_dir())
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "node {script} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
