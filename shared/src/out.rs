//! Lines on stdout and stderr that never panic: the startup, status and
//! summary lines of the commands, and the processors' EMF metric lines.
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
//! The `jobstream` crate's `outln!`/`errln!` macros call these.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set at stdout's first failed write: nothing is written there after it.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// `args` and a newline on stdout (flushed), as `println!`; once stdout
/// failed, dropped.
pub fn line(args: fmt::Arguments<'_>) {
    write_line(&mut std::io::stdout().lock(), args, &STDOUT_FAILED);
}

/// `args` and a newline on stderr, as `eprintln!`; when stderr cannot be
/// written there is nowhere to say so: the line is dropped.
pub fn err_line(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _unsaid = writeln!(err, "{args}");
}

/// `args` and a newline on `w`, flushed; false when not written (now, or
/// earlier: `failed`). The first failure is logged.
fn write_line(w: &mut impl Write, args: fmt::Arguments<'_>, failed: &AtomicBool) -> bool {
    if failed.load(Ordering::Relaxed) {
        return false;
    }
    match writeln!(w, "{args}").and_then(|()| w.flush()) {
        Ok(()) => true,
        Err(e) => {
            if !failed.swap(true, Ordering::Relaxed) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

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
        assert!(!write_line(&mut w, format_args!("status {}", 1), &failed));
        assert!(failed.load(Ordering::Relaxed));
        let tried = w.writes;
        assert!(!write_line(&mut w, format_args!("status {}", 2), &failed));
        assert_eq!(w.writes, tried, "not written again");
    }

    #[test]
    fn a_line_is_the_text_and_a_newline() {
        let failed = AtomicBool::new(false);
        let mut w = Vec::new();
        assert!(write_line(&mut w, format_args!("tables: {}", "t"), &failed));
        assert!(write_line(&mut w, format_args!("processors: p"), &failed));
        assert_eq!(String::from_utf8(w).unwrap(), "tables: t\nprocessors: p\n");
    }
}
