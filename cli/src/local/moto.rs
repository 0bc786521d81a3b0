//! SQS locally: moto in server mode (`moto[server]` from PyPI) on loopback,
//! installed into a project-local virtualenv and started by jobstream
//! itself when no SQS endpoint is configured.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// The moto version this project installs.
pub const MOTO_REQUIREMENT: &str = "moto[sqs,server]==5.2.5";

/// A running moto server; stopped on drop (and when this process exits,
/// through a watchdog, so a test binary never leaks one).
pub struct Moto {
    child: Child,
    port: u16,
}

/// `.venv-moto` at the workspace root (or `JOBSTREAM_MOTO_VENV`).
pub fn venv_dir() -> PathBuf {
    if let Some(v) = std::env::var_os("JOBSTREAM_MOTO_VENV") {
        return PathBuf::from(v);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(".venv-moto")
}

/// Creates the virtualenv and installs moto if `moto_server` is missing.
pub fn ensure_installed() -> anyhow::Result<PathBuf> {
    let venv = venv_dir();
    let server = venv.join("bin").join("moto_server");
    if server.exists() {
        return Ok(server);
    }
    eprintln!(
        "installing {MOTO_REQUIREMENT} into {} (once)",
        venv.display()
    );
    let status = Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .status()
        .context("python3 -m venv")?;
    anyhow::ensure!(status.success(), "python3 -m venv failed");
    let status = Command::new(venv.join("bin").join("pip"))
        .args(["install", "-q", MOTO_REQUIREMENT])
        .status()
        .context("pip install moto")?;
    anyhow::ensure!(status.success(), "pip install {MOTO_REQUIREMENT} failed");
    Ok(server)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"GET /moto-api/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if n >= 12 && &buf[9..12] == b"200")
}

impl Moto {
    /// Installs (if needed) and starts moto on a free loopback port.
    pub fn start() -> anyhow::Result<Self> {
        let server = ensure_installed()?;
        let port = free_port()?;
        // The watchdog shell stops moto when our process goes away.
        let script = format!(
            "\"{}\" -H 127.0.0.1 -p {port} & m=$!; trap 'kill $m; exit 0' TERM; while kill -0 {} 2>/dev/null; do sleep 1; done; kill $m",
            server.display(),
            std::process::id()
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting moto_server")?;
        let started = Instant::now();
        while !ready(port) {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "moto did not start within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(Self { child, port })
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        // SIGTERM to the watchdog shell, which stops moto and exits.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
