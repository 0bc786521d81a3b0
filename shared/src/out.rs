//! Lines on stdout and stderr that never panic and, in the long-running
//! commands, never block: the startup, status and summary lines of the
//! commands, the processors' EMF metric lines, and the log lines.
//!
//! `println!` and `eprintln!` panic when their stream cannot be written. A
//! reader that went away (`jobstream dev 2>&1 | head -3`, a log shipper or
//! `tee` that died) makes every write EPIPE (Rust ignores SIGPIPE, which
//! the sockets need): a consumer then died at its next status line (exit
//! 101), or a handler panicked at its EMF line (a failed invocation,
//! retried for ever). Through [`line`], stdout's first failure is logged
//! once (`ERROR`: the status and EMF lines stop, dashboards see them
//! missing), nothing more is written there, and the process carries on.
//! [`err_line`] writes stderr, where a failure has nowhere to be said.
//!
//! A reader that stays but stops reading (a stalled log shipper, `| sleep`)
//! is worse: once the pipe's buffer is full, a write blocks, and with it
//! the thread that wrote (ops11 #3: the whole `run` stopped: no record, no
//! probe answered, SIGTERM ignored). After [`non_blocking`] (`run`, `serve`,
//! `dev`), each stream has a writer thread behind a bounded queue of
//! [`QUEUED_LINES`] lines: a line is queued or, when the queue is full,
//! dropped and counted ([`dropped`]); the lines written keep their order,
//! and once the stream takes writes again the writer says how many were
//! dropped (stderr: `N log lines dropped: stderr was not being read`;
//! stdout: a `WARN` on stderr, stdout keeping only its documented lines).
//! [`flush`] waits, for a bounded time, until what was queued is written
//! (the exit line); [`exit_by`] bounds that wait by the end of a stop.
//!
//! The `jobstream` crate's `outln!`/`errln!` macros call these; its log
//! subscriber writes through [`log_writer`].

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How many lines each stream's writer holds while its reader does not
/// read (past them, lines are dropped and counted). A reader that reads
/// (a terminal, a log shipper, a file) never lets it fill: it bounds the
/// memory of a stalled one (lines of a few hundred bytes: well under a
/// megabyte).
pub const QUEUED_LINES: usize = 1024;

/// One of the process's two output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr`.
    pub fn name(self) -> &'static str {
        self.pipe().name
    }

    fn pipe(self) -> &'static Pipe {
        match self {
            Stream::Stdout => &STDOUT,
            Stream::Stderr => &STDERR,
        }
    }
}

/// A stream: how it is written (directly, or by its writer thread once
/// [`non_blocking`] started it) and what it did not write.
struct Pipe {
    name: &'static str,
    /// The writer thread's queue (none: written directly, blocking).
    queue: OnceLock<SyncSender<Vec<u8>>>,
    /// Set at the stream's first failed write: nothing is written there
    /// after it.
    failed: AtomicBool,
    /// Lines queued, and lines the writer thread is done with (written or
    /// not): what [`flush`] waits for.
    queued: AtomicU64,
    done: Mutex<u64>,
    done_changed: Condvar,
    /// Lines not written: the queue full, or the stream failed.
    dropped: AtomicU64,
    /// Lines dropped on a full queue that the writer has not said yet.
    unsaid: AtomicU64,
}

static STDOUT: Pipe = Pipe::new("stdout");
static STDERR: Pipe = Pipe::new("stderr");

/// The latest moment [`flush`] waits until (`run`'s stop: the end of its
/// `--shutdown-grace`).
static EXIT_BY: Mutex<Option<Instant>> = Mutex::new(None);

/// `args` and a newline on stdout (flushed), as `println!`; once stdout
/// failed, dropped; when its queue is full, dropped and counted.
pub fn line(args: fmt::Arguments<'_>) {
    STDOUT.put(format!("{args}\n").into_bytes());
}

/// `args` and a newline on stderr, as `eprintln!`; when stderr cannot be
/// written there is nowhere to say so: the line is dropped.
pub fn err_line(args: fmt::Arguments<'_>) {
    STDERR.put(format!("{args}\n").into_bytes());
}

/// The log subscriber's writer (a `tracing_subscriber` `MakeWriter` as a
/// function): each event, written whole at once, is one line on stderr
/// through [`err_line`]'s path. It never fails: a line stderr cannot take
/// is dropped.
pub fn log_writer() -> LogWriter {
    LogWriter
}

/// See [`log_writer`].
#[derive(Debug)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        STDERR.put(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// From now on, stdout and stderr are written by a thread each, behind a
/// bounded queue: no write blocks its caller, whether or not the stream's
/// reader reads (module docs). Panic messages take the same path. Once
/// per process (later calls do nothing); an error when a thread cannot be
/// started (the streams are then written directly, as before).
pub fn non_blocking() -> io::Result<()> {
    let started = STDOUT.start()? | STDERR.start()?;
    if started {
        std::panic::set_hook(Box::new(say_panic));
    }
    Ok(())
}

/// Waits until every line queued so far is written (or given up), for at
/// most `within` and never past [`exit_by`]'s moment; whether it was.
/// Before [`non_blocking`], nothing is queued: true at once.
pub fn flush(within: Duration) -> bool {
    let mut deadline = Instant::now() + within;
    if let Some(by) = *EXIT_BY.lock().unwrap_or_else(PoisonError::into_inner) {
        deadline = deadline.min(by);
    }
    // stdout first: its failure or drops are said on stderr.
    STDOUT.wait_written(deadline) & STDERR.wait_written(deadline)
}

/// The process ends by `at` (a stop's deadline): [`flush`] waits no later.
pub fn exit_by(at: Instant) {
    *EXIT_BY.lock().unwrap_or_else(PoisonError::into_inner) = Some(at);
}

/// Lines not written to `stream` so far: dropped on a full queue (its
/// reader did not read), or after the stream failed (its reader went away).
pub fn dropped(stream: Stream) -> u64 {
    stream.pipe().dropped.load(Ordering::Relaxed)
}

impl Pipe {
    const fn new(name: &'static str) -> Self {
        Self {
            name,
            queue: OnceLock::new(),
            failed: AtomicBool::new(false),
            queued: AtomicU64::new(0),
            done: Mutex::new(0),
            done_changed: Condvar::new(),
            dropped: AtomicU64::new(0),
            unsaid: AtomicU64::new(0),
        }
    }

    fn is_stdout(&self) -> bool {
        std::ptr::eq(self, &STDOUT)
    }

    /// Starts the writer thread; false when it already runs.
    fn start(&'static self) -> io::Result<bool> {
        if self.queue.get().is_some() {
            return Ok(false);
        }
        let (tx, rx) = sync_channel(QUEUED_LINES);
        std::thread::Builder::new()
            .name(format!("jobstream-{}", self.name))
            .spawn(move || self.pump(rx))?;
        Ok(self.queue.set(tx).is_ok())
    }

    /// `bytes` (whole lines) queued, or written at once before
    /// [`non_blocking`].
    fn put(&self, bytes: Vec<u8>) {
        if self.failed.load(Ordering::Relaxed) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(queue) = self.queue.get() else {
            self.write(&bytes);
            return;
        };
        match queue.try_send(bytes) {
            Ok(()) => {
                self.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.unsaid.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The writer thread: the queue's lines, in order, each flushed.
    fn pump(&self, lines: Receiver<Vec<u8>>) {
        while let Ok(bytes) = lines.recv() {
            let unsaid = self.unsaid.swap(0, Ordering::Relaxed);
            if unsaid > 0 {
                self.say_dropped(unsaid);
            }
            self.write(&bytes);
            let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
            *done += 1;
            self.done_changed.notify_all();
        }
    }

    /// Writes `bytes` and flushes; false when not written (now, or
    /// earlier: the stream failed). Stdout's first failure is logged.
    fn write(&self, bytes: &[u8]) -> bool {
        let written = if self.is_stdout() {
            write_line(&mut io::stdout().lock(), bytes, &self.failed)
        } else {
            write_line(&mut io::stderr().lock(), bytes, &self.failed)
        };
        if !written {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        written
    }

    /// How many lines were dropped on a full queue, once the stream takes
    /// writes again: on stderr itself, or for stdout (which keeps only its
    /// documented lines) in the log.
    fn say_dropped(&self, n: u64) {
        if self.is_stdout() {
            tracing::warn!(
                dropped = n,
                "{n} lines dropped: stdout was not being read (status lines, --emit-metrics' EMF lines); it is again"
            );
        } else {
            let said = format!("{n} log lines dropped: stderr was not being read\n");
            write_line(&mut io::stderr().lock(), said.as_bytes(), &self.failed);
        }
    }

    /// Until the lines queued so far are done, or `deadline`.
    fn wait_written(&self, deadline: Instant) -> bool {
        let target = self.queued.load(Ordering::Relaxed);
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while *done < target {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            done = self
                .done_changed
                .wait_timeout(done, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// `bytes` on `w`, flushed; false when not written (now, or earlier:
/// `failed`). The first failure sets `failed`; stdout's is logged.
fn write_line(w: &mut impl Write, bytes: &[u8], failed: &AtomicBool) -> bool {
    if failed.load(Ordering::Relaxed) {
        return false;
    }
    match w.write_all(bytes).and_then(|()| w.flush()) {
        Ok(()) => true,
        // A stream set non-blocking by whoever shares it: this line only.
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(e) => {
            if !failed.swap(true, Ordering::Relaxed) && std::ptr::eq(failed, &STDOUT.failed) {
                tracing::error!(
                    error = %e,
                    "stdout cannot be written (its reader went away?): nothing more is printed \
                     there (status lines, --emit-metrics' EMF lines); the process carries on"
                );
            }
            false
        }
    }
}

/// The panic hook once [`non_blocking`]: the message std's own hook
/// prints (thread, place, payload, the backtrace when asked for), queued
/// on stderr instead of written there (where it blocked the panicking
/// thread on a stalled reader).
fn say_panic(info: &std::panic::PanicHookInfo<'_>) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let backtrace = std::backtrace::Backtrace::capture();
    match backtrace.status() {
        std::backtrace::BacktraceStatus::Captured => {
            err_line(format_args!(
                "\nthread '{name}' {info}\nstack backtrace:\n{backtrace}"
            ));
        }
        _ => err_line(format_args!(
            "\nthread '{name}' {info}\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader went away: every write is EPIPE.
    struct Gone {
        writes: usize,
    }

    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stream_gone_is_given_up_at_its_first_failure_without_a_panic() {
        let failed = AtomicBool::new(false);
        let mut w = Gone { writes: 0 };
        assert!(!write_line(&mut w, b"status 1\n", &failed));
        assert!(failed.load(Ordering::Relaxed));
        let tried = w.writes;
        assert!(!write_line(&mut w, b"status 2\n", &failed));
        assert_eq!(w.writes, tried, "not written again");
    }

    #[test]
    fn a_line_is_the_text_and_a_newline() {
        let failed = AtomicBool::new(false);
        let mut w = Vec::new();
        assert!(write_line(&mut w, b"tables: t\n", &failed));
        assert!(write_line(&mut w, b"processors: p\n", &failed));
        assert_eq!(String::from_utf8(w).unwrap(), "tables: t\nprocessors: p\n");
    }
}
