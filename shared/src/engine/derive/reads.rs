//! What a group's reads bring: the sources' ledger records and the
//! counters whose items lag their totals (the owners of shared derived
//! items: [`super::owners`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;

use super::implied::{contribution_deltas, Implied};
use super::keys::{source_key_pk, total_key, SOURCE_SK};
use super::trail::{PerAspect, Trail};
use super::{Deriver, ToSync};
use crate::change::SequenceNumber;
use crate::error::ProcessError;
use crate::item::{Item, ItemExt};
use crate::ledger::{self, item_id};

/// A source item's recorded state: what it implies, the record version,
/// and the counters its changes may still owe a write.
#[derive(Debug, Clone, Default)]
pub(super) struct Recorded {
    pub(super) implied: Implied,
    /// 0 = no record.
    pub(super) ver: i64,
    /// counter id -> counter key: the counters whose totals this source's
    /// last change(s) moved. Each is synced whenever the source is
    /// reconciled and its totals show a counter item that lags, so a
    /// counter write lost after the ledger commit (a crash, throttling past
    /// the retries) is made by the redelivery, which finds the source
    /// itself unchanged.
    pub(super) owed: BTreeMap<String, Item>,
    /// What it keeps of the stream (see [`super::trail`]).
    pub(super) trail: Trail,
    /// Its pending state is kept in an item of its own beside the record
    /// ([`PENDING_SK`]): with it, the record would pass DynamoDB's item
    /// limit.
    pub(super) spilled: bool,
}

/// The record attribute listing the counters a source's change still owes.
pub(super) const OWED: &str = "o";

/// The record attribute holding the sequence number of the newest record of
/// the source the derive had met when it wrote the record.
pub(super) const SEQ: &str = "q";

/// The record attribute holding the state pending (see [`super::trail`]).
pub(super) const PENDING: &str = "l";

/// The record attribute saying its pending state is kept beside it, in the
/// item of sort key [`PENDING_SK`] (its value: the record version that
/// wrote it, which that item carries too).
pub(super) const SPILLED: &str = "lx";

/// Sort key of the item beside a source record that holds its pending
/// state when the two together would pass DynamoDB's item limit (each state
/// alone fits: an image whose record cannot be written is bad input).
pub(super) const PENDING_SK: &str = "L";

impl Deriver {
    /// The records of the sources at `keys` (ledger keys), by their
    /// partition key. A record whose pending state is kept beside it is
    /// read with that item; one read while another consumer committed the
    /// source (the item beside it already of a newer version, or gone) is
    /// read again, both as they are now.
    pub(super) async fn read_recorded(
        &self,
        keys: Vec<Item>,
    ) -> Result<HashMap<String, Recorded>, ProcessError> {
        let mut out = HashMap::new();
        let mut items = self.store.batch_get(&self.ledger_table, keys).await?;
        for _ in 0..READ_AGAIN {
            // The pending states kept beside their records, in one more
            // read (only when some record says so).
            let spill_keys: Vec<Item> = items
                .iter()
                .filter(|i| i.contains_key(SPILLED))
                .filter_map(|i| ledger::as_s(i.get(ledger::PK)))
                .map(|pk| ledger::key(pk, PENDING_SK))
                .collect();
            let mut spills: HashMap<String, Item> = HashMap::new();
            if !spill_keys.is_empty() {
                for s in self.store.batch_get(&self.ledger_table, spill_keys).await? {
                    let pk = ledger::as_s(s.get(ledger::PK))
                        .unwrap_or_default()
                        .to_string();
                    spills.insert(pk, s);
                }
            }
            let mut again = Vec::new();
            for item in items {
                let pk = ledger::as_s(item.get(ledger::PK))
                    .unwrap_or_default()
                    .to_string();
                match recorded_of(&pk, &item, spills.get(&pk))? {
                    Some(rec) => {
                        out.insert(pk, rec);
                    }
                    None => again.push(ledger::key(&pk, SOURCE_SK)),
                }
            }
            if again.is_empty() {
                return Ok(out);
            }
            items = self.store.batch_get(&self.ledger_table, again).await?;
        }
        Err(ProcessError::Conflict(format!(
            "ledger records {}: the pending state each keeps beside it is missing or of another version, read after read (another consumer committing them all along, or the ledger changed by hand)",
            items
                .iter()
                .filter_map(|i| ledger::as_s(i.get(ledger::PK)))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// The counters the sources' recorded changes moved (their records'
    /// owed counters) that this batch must sync: each one that the source's
    /// change moves again is synced whatever its totals say (it is owed by
    /// the record rewritten, and the sync reads its totals anyway), and is
    /// added to `counters` without a read; the others are read and those
    /// whose items lag their totals are returned (synced by this batch, and
    /// carried by any record rewritten) and added to `counters` too, as
    /// counted: a counter owed whose totals do not exist is a first count
    /// whose sync was lost (see `counts::Counted`).
    pub(super) async fn owed_lagging(
        &self,
        group: &[Item],
        base: usize,
        recorded: &HashMap<String, Recorded>,
        wanted: &[(usize, Implied, Vec<Item>)],
        to_sync: &mut ToSync<'_>,
    ) -> Result<BTreeMap<String, Item>, ProcessError> {
        let mut unknown: BTreeMap<String, Item> = BTreeMap::new();
        for (pos, implied, _) in wanted {
            let key = &group[*pos - base];
            let Some(rec) = recorded.get(&source_key_pk(self.processor, key)) else {
                continue;
            };
            if rec.owed.is_empty() {
                continue;
            }
            let moved = contribution_deltas(implied, &rec.implied);
            for (id, k) in &rec.owed {
                if moved.contains_key(id) {
                    if let Some(c) = self.rules.counter(k) {
                        to_sync.counters.insert(item_id(k), c);
                    }
                } else {
                    unknown.insert(id.clone(), k.clone());
                }
            }
        }
        let lagging = self.lagging(unknown).await?;
        to_sync.count(self.rules.as_ref(), &lagging);
        Ok(lagging)
    }

    /// Of the `owed` counters, those whose items lag their totals (the
    /// totals' `synced` version behind their `ver`).
    async fn lagging(
        &self,
        owed: BTreeMap<String, Item>,
    ) -> Result<BTreeMap<String, Item>, ProcessError> {
        if owed.is_empty() {
            return Ok(owed);
        }
        let keys = owed
            .values()
            .map(|k| total_key(self.processor, k))
            .collect();
        let in_sync: BTreeSet<String> = self
            .store
            .batch_get(&self.ledger_table, keys)
            .await?
            .into_iter()
            .filter(crate::engine::counts::is_synced)
            .filter_map(|t| ledger::as_s(t.get(ledger::PK)).map(str::to_string))
            .collect();
        Ok(owed
            .into_iter()
            .filter(|(_, k)| {
                let pk = total_key(self.processor, k);
                !ledger::as_s(pk.get(ledger::PK)).is_some_and(|pk| in_sync.contains(pk))
            })
            .collect())
    }
}

/// Reads of a record and the item beside it that may disagree (another
/// consumer committed between them) before the batch is retried.
const READ_AGAIN: usize = 5;

/// A source's record as read (`item`, partition key `pk`), with the item
/// beside it holding its pending state if the record says so (`spill`).
/// `None`: the record says its pending state is beside it and that item is
/// of another version or gone (read between another consumer's commits:
/// read both again).
fn recorded_of(
    pk: &str,
    item: &Item,
    spill: Option<&Item>,
) -> Result<Option<Recorded>, ProcessError> {
    let corrupt =
        |e: String| ProcessError::Permanent(format!("ledger record {pk} is corrupt: {e}"));
    let implied = Implied::from_record(item).map_err(&corrupt)?;
    let ver = item.opt_i64("ver").ok().flatten().unwrap_or(1);
    let mut owed = BTreeMap::new();
    if let Some(AttributeValue::M(o)) = item.get(OWED) {
        for (id, key) in o {
            if let AttributeValue::M(key) = key {
                owed.insert(id.clone(), key.clone());
            }
        }
    }
    let seq = match item.get(SEQ) {
        None => None,
        Some(AttributeValue::S(q)) => Some(
            SequenceNumber::parse(q)
                .ok_or_else(|| corrupt(format!("{SEQ} is no sequence number")))?,
        ),
        Some(_) => return Err(corrupt(format!("{SEQ} is not a string"))),
    };
    let spilled = item.get(SPILLED);
    let pending = match spilled {
        None => PerAspect::from_attr(item.get(PENDING)).map_err(&corrupt)?,
        Some(written) => match spill.filter(|s| s.get("ver") == Some(written)) {
            Some(spill) => PerAspect::from_attr(spill.get(PENDING)).map_err(&corrupt)?,
            None => return Ok(None),
        },
    };
    Ok(Some(Recorded {
        implied,
        ver,
        owed,
        trail: Trail { seq, pending },
        spilled: spilled.is_some(),
    }))
}
