//! Progress of long-running work (backfill, verify's scans, the first local
//! SQS install) on stderr, with `indicatif`: drawn only when stderr is a
//! terminal (hidden in pipes, CI and tests), so stdout keeps only the
//! documented lines.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner with a message and a running count (`{pos}`), on stderr.
pub fn spinner(message: impl Into<String>) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {human_pos} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(message.into());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// A bar towards `total` (items), with rate and ETA, on stderr.
pub fn bar(message: impl Into<String>, total: u64) -> ProgressBar {
    if total == 0 {
        return spinner(message);
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {human_pos}/{human_len} items, {per_sec}, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(message.into());
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_hidden_when_stderr_is_not_a_terminal() {
        // `cargo test` captures stderr: not a terminal, nothing is drawn.
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return;
        }
        let pb = bar("backfill", 10);
        pb.inc(3);
        assert!(pb.is_hidden());
        assert_eq!(pb.position(), 3, "the count is kept for the final line");
        assert!(spinner("scan").is_hidden());
    }
}
