//! `jobstream demo --model hr`.

use crate::engine::setjob::BoxFut;
use crate::models::{BoxError, Harness};

pub fn run(_h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(async move { Ok(vec![]) })
}
