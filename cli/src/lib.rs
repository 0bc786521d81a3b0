//! The `jobstream` CLI's library, generic over the model registry
//! (`shared::models::registry`):
//!
//! - [`local`] - the local Lambda emulation: embedded engine, stream and SQS
//!   event source mappings, the local SQS server, a model's runtime.
//! - [`tools`] - verify, backfill, the deploy definitions, `run`'s flags,
//!   import, graph, explain.
//! - [`progress`] - progress of long-running work on stderr (terminals only).
//! - `faults` (feature `faults`, and the crate's own tests) - a
//!   fault-injecting proxy for tests.
//! - [`meter`] - the bill meter: a proxy summing the capacity DynamoDB
//!   would bill (RRU, WRU) per operation, for the benchmarks.
//! - [`outln!`], [`errln!`] - `println!`/`eprintln!` that never panic
//!   ([`shared::out`]): a reader that went away is logged once.
//!
//! The commands themselves are in `main.rs`.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

/// The allocator the Lambda functions use (`functions/*/src/main.rs`), for
/// the binary, the benches and the tests alike: local = deployed. Without
/// the default feature `mimalloc`, the system allocator (to measure).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(any(test, feature = "faults"))]
pub mod faults;
pub mod local;
pub mod meter;
pub mod progress;
pub mod tools;

/// `println!` that never panics: a line on stdout through
/// [`shared::out::line`]; once stdout cannot be written (its reader went
/// away), logged once and dropped.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        ::shared::out::line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a line on stderr through
/// [`shared::out::err_line`], dropped when stderr cannot be written.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        ::shared::out::err_line(format_args!($($arg)*))
    };
}
