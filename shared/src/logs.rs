//! How log fields are written: a value can never forge a line. Keys,
//! reasons and names come from writers' items and users' model files; a
//! key holding `\n2026-... ERROR handler panicked` or an ANSI escape, logged
//! as is, would be a line of its own (deployed, a CloudWatch event of its
//! own, which alarms and metric filters read) or recolour a terminal
//! (hostile13's #9). Every field, the message too, is written with its
//! control characters escaped (`\n`, `\r`, `\u{1b}`), as `Debug` writes a
//! string; the line's shape is otherwise the formatter's own. JSON logs
//! (Lambda's `AWS_LAMBDA_LOG_FORMAT=JSON`) escape them already.

use std::fmt;

use tracing::field::Field;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format::{debug_fn, Writer};

/// The fields formatter of every text log (`fmt().fmt_fields(fields())`).
pub fn fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    debug_fn(
        |w: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug| {
            if field.name() != "message" {
                write!(w, "{}=", field.name())?;
            }
            escaped(w, &format!("{value:?}"))
        },
    )
    .delimited(" ")
}

/// `text` with its control characters escaped.
fn escaped(w: &mut impl fmt::Write, text: &str) -> fmt::Result {
    for c in text.chars() {
        if c.is_control() {
            for e in c.escape_default() {
                w.write_char(e)?;
            }
        } else {
            w.write_char(c)?;
        }
    }
    Ok(())
}

/// A Lambda's logs, as `lambda_runtime`'s default subscriber sets them up
/// (Lambda's log level and format controls, `RUST_LOG`, no time and no
/// target: CloudWatch adds them), with [`fields`] for text logs.
pub fn init_lambda() {
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::EnvFilter;
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|l| l.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let logs = tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_env_filter(
            EnvFilter::builder()
                .with_default_directive(level.into())
                .from_env_lossy(),
        )
        .with_writer(std::io::stdout);
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    if json {
        logs.json().init();
    } else {
        logs.fmt_fields(fields()).init();
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A key holding a line break, a carriage return and an ANSI escape
    /// (a writer's item: hostile13's #9) is one line, escaped, whichever
    /// way it is logged: a `%` field, a `?` field, the message.
    #[test]
    fn a_value_never_forges_a_line_or_an_escape() {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .fmt_fields(fields())
            .finish();
        let key =
            "PK=ZZZ\n2026-11-28T08:00:00.000000Z ERROR FORGED handler panicked\r\u{1b}[31mred";
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(processor = "derive", key = %key, reason = ?key, "skipping record: bad input");
            tracing::warn!("bad input at {key}");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in &lines {
            assert!(!line.contains('\r') && !line.contains('\u{1b}'), "{line:?}");
            assert!(
                line.contains(r"ZZZ\n2026-11-28T08:00:00.000000Z ERROR FORGED"),
                "{line}"
            );
        }
        assert!(lines[0].contains(r#"processor="derive""#), "{}", lines[0]);
        assert!(lines[0].contains(r"key=PK=ZZZ\n"), "{}", lines[0]);
        assert!(lines[0].contains(r"\u{1b}[31mred"), "{}", lines[0]);
        assert!(
            lines[0].contains("skipping record: bad input"),
            "{}",
            lines[0]
        );
    }
}
