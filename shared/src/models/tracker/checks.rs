//! The tracker's checks for `verify` beyond what the stream rules imply: its
//! history (see [`super::history_check`]), per application partition.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::history_check::{self, check_partition};
use super::keys::{self, Kind};
use crate::engine::setjob::BoxFut;
use crate::item::{Item, ItemExt};
use crate::models::{CheckInput, Finding, GuardedRepair, ModelRepair, Repair};
use crate::store::Store;

#[derive(Default)]
struct Partition {
    app: Option<Item>,
    stages: Vec<Item>,
    history: Vec<Item>,
}

impl GuardedRepair for history_check::Repair {
    fn describe(&self) -> String {
        format!("{self:?}")
    }

    fn apply<'a>(
        &'a self,
        store: &'a Store,
        table: &'a str,
    ) -> BoxFut<'a, Result<bool, crate::error::StoreError>> {
        Box::pin(history_check::Repair::apply(self, store, table))
    }
}

/// History findings of every application partition.
pub fn check(input: &CheckInput<'_>) -> Vec<Finding> {
    let mut parts: BTreeMap<String, Partition> = BTreeMap::new();
    for item in input.items {
        let (Ok(pk), Ok(sk)) = (item.s(keys::PK), item.s(keys::SK)) else {
            continue;
        };
        let kind = keys::kind(pk, sk);
        if !matches!(kind, Some(Kind::Application | Kind::Stage | Kind::History)) {
            continue;
        }
        let p = parts.entry(pk.to_string()).or_default();
        match kind {
            Some(Kind::Application) => p.app = Some(item.clone()),
            Some(Kind::Stage) => p.stages.push(item.clone()),
            _ => p.history.push(item.clone()),
        }
    }
    let mut out = Vec::new();
    for (pk, p) in &parts {
        let found = check_partition(pk, p.app.as_ref(), &p.stages, &p.history);
        for f in found.findings {
            out.push(Finding {
                kind: f.kind,
                drift: f.drift,
                what: f.what,
                repair: f.repair.map(|r| Repair::Model(ModelRepair(Arc::new(r)))),
            });
        }
    }
    out
}
