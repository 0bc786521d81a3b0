//! The `jobstream demo --model pickem` scenario (written below).

use crate::engine::setjob::BoxFut;
use crate::models::{BoxError, Harness};

/// Plays the scenario; returns the differences from what it implies.
pub fn demo(_h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(async move { Ok(vec!["not written yet".to_string()]) })
}
