//! SQS locally: [fauxqs](https://www.npmjs.com/package/fauxqs) on Node 22,
//! both from the npm registry (`scripts/local-sqs/package.json` pins them),
//! installed into `scripts/local-sqs/node_modules` by `npm ci` and started
//! by jobstream itself on a loopback port when no SQS endpoint is
//! configured. It speaks the JSON protocol of the Rust SDK, keeps its queues
//! in memory, and sustains thousands of receive+delete messages/s at a depth
//! of 10,000 (the README's table compares it with moto, the previous choice,
//! whose cost grows with the queue's depth).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context as _;

/// What `npm ci` installs (pinned with its lockfile in `scripts/local-sqs`).
pub const LOCAL_SQS_PACKAGES: &str = "fauxqs 2.4.1 on node 22.23.3 (npm)";

/// How long the server may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running local SQS server; stopped on drop (and by itself when this
/// process goes away, so a test binary never leaks one).
pub struct LocalSqs {
    child: Child,
    endpoint: String,
}

/// Where the local SQS is: `JOBSTREAM_LOCAL_SQS_DIR`, else `local-sqs/`
/// next to the binary (a binary-only install: the repository's
/// `scripts/local-sqs` copied there), else `scripts/local-sqs` of the
/// checkout the binary was built from.
pub fn install_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    pick_dir(
        std::env::var_os("JOBSTREAM_LOCAL_SQS_DIR").map(PathBuf::from),
        exe.as_deref().and_then(Path::parent),
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("scripts")
            .join("local-sqs"),
    )
}

/// [`install_dir`]'s choice: the variable, else `local-sqs` beside the
/// binary when it holds the lockfile, else the build checkout's.
fn pick_dir(var: Option<PathBuf>, exe_dir: Option<&Path>, built: &Path) -> PathBuf {
    if let Some(v) = var {
        return v;
    }
    match exe_dir.map(|d| d.join("local-sqs")) {
        Some(beside) if beside.join("package-lock.json").exists() => beside,
        _ => built.to_path_buf(),
    }
}

/// The Node binary the `node` package installs.
fn node_binary(dir: &Path) -> PathBuf {
    dir.join("node_modules").join(".bin").join("node")
}

/// Runs `npm ci` in [`install_dir`] if Node 22 or fauxqs is missing; returns
/// the directory.
pub fn ensure_installed() -> anyhow::Result<PathBuf> {
    let dir = install_dir();
    let installed = node_binary(&dir).exists()
        && dir
            .join("node_modules")
            .join("fauxqs")
            .join("package.json")
            .exists();
    if installed {
        return Ok(dir);
    }
    anyhow::ensure!(
        dir.join("package-lock.json").exists(),
        "{} has no package-lock.json: the local SQS (queues of `once:`, `sets:`, `compute:`) runs from the repository's scripts/local-sqs (package.json, package-lock.json, server.mjs; Node.js and npm on PATH); with the binary alone, copy that folder next to it as `local-sqs/`, or set JOBSTREAM_LOCAL_SQS_DIR to it",
        dir.display()
    );
    crate::errln!(
        "installing the local SQS ({LOCAL_SQS_PACKAGES}) into {} (once)",
        dir.display()
    );
    // npm's own report ("added 81 packages") goes to stderr: stdout keeps
    // only the documented lines.
    let progress = crate::progress::spinner("npm ci (local SQS)");
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .context("running npm ci (Node.js and npm must be on PATH)");
    progress.finish_and_clear();
    let status = status?;
    anyhow::ensure!(status.success(), "npm ci in {} failed", dir.display());
    Ok(dir)
}

impl LocalSqs {
    /// Installs (if needed) and starts the server on a free loopback port.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_on(0)
    }

    /// [`LocalSqs::start`] on 127.0.0.1:`port` (0: a free one).
    pub fn start_on(port: u16) -> anyhow::Result<Self> {
        let dir = ensure_installed()?;
        let mut child = Command::new(node_binary(&dir))
            .arg("--disable-warning=ExperimentalWarning")
            .arg(dir.join("server.mjs"))
            .arg(port.to_string())
            .arg(std::process::id().to_string())
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the local SQS (node server.mjs)")?;
        // What Node says on stderr (a warning, its last words) goes to ours
        // through `errln!`: never blocked by a reader that stalls, where
        // an inherited stderr blocked the server itself, and with it every
        // queue of the process (ops11 #3).
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    crate::errln!("{line}");
                }
            });
        }
        let stdout = child.stdout.take().context("the server's stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(read);
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => {
                stop(&mut child);
                return Err(e).context("reading the local SQS's address");
            }
            Err(_) => {
                stop(&mut child);
                anyhow::bail!("the local SQS did not start within {START_TIMEOUT:?}");
            }
        };
        let Some(endpoint) = parse_listening(&line) else {
            stop(&mut child);
            let on = match port {
                0 => String::new(),
                p => format!(" on port {p} (is it in use?)"),
            };
            anyhow::bail!("the local SQS did not start{on} (it printed {line:?})");
        };
        Ok(Self { child, endpoint })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }
}

/// The endpoint in the server's `listening http://127.0.0.1:PORT` line.
fn parse_listening(line: &str) -> Option<String> {
    let url = line.trim().strip_prefix("listening ")?;
    let port: u16 = url.strip_prefix("http://127.0.0.1:")?.parse().ok()?;
    Some(format!("http://127.0.0.1:{port}"))
}

/// Kills the server and reaps it (in-memory queues: nothing to flush, so a
/// plain kill is enough).
fn stop(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for LocalSqs {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_listening, pick_dir};
    use std::path::{Path, PathBuf};

    /// R09: a binary-only install finds `local-sqs/` next to the binary;
    /// the variable wins; without either, the build checkout's.
    #[test]
    fn the_local_sqs_is_found_beside_the_binary() {
        let exe_dir = std::env::temp_dir().join(format!("jobstream-bin-{}", std::process::id()));
        let built = Path::new("/checkout/scripts/local-sqs");
        std::fs::create_dir_all(exe_dir.join("local-sqs")).unwrap();
        assert_eq!(
            pick_dir(None, Some(&exe_dir), built),
            built,
            "no lockfile there"
        );
        std::fs::write(exe_dir.join("local-sqs").join("package-lock.json"), "{}").unwrap();
        assert_eq!(
            pick_dir(None, Some(&exe_dir), built),
            exe_dir.join("local-sqs")
        );
        assert_eq!(
            pick_dir(Some(PathBuf::from("/x")), Some(&exe_dir), built),
            PathBuf::from("/x")
        );
        assert_eq!(pick_dir(None, None, built), built);
        std::fs::remove_dir_all(&exe_dir).unwrap();
    }

    #[test]
    fn the_servers_address_line_is_parsed_or_refused() {
        assert_eq!(
            parse_listening("listening http://127.0.0.1:4566\n").as_deref(),
            Some("http://127.0.0.1:4566")
        );
        assert_eq!(parse_listening("listening http://0.0.0.0:4566"), None);
        assert_eq!(parse_listening("Error: EADDRINUSE"), None);
        assert_eq!(parse_listening("listening http://127.0.0.1:notaport"), None);
    }
}
