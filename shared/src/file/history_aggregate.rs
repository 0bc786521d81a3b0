//! A history's aggregates by id: the values its root's key binds (one:
//! the value itself; several, a root keyed under its owner: a JSON list),
//! and where its items are.

use super::history::{FileHistory, Role};
use crate::engine::fold::FoldRules;
use crate::item::{Item, ItemExt};

/// Where an item stands in a history (`jobstream explain`).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPlace {
    /// What it is to the history, one line.
    pub what: String,
    /// A root's latest entry (the one its mirror numbers), to look up.
    pub latest_entry: Option<Item>,
}

impl FileHistory {
    /// The aggregate of an item of the history (root, member or entry):
    /// the values its key binds for the aggregate's id (one value: the
    /// value itself; several, keyed under an owner: a JSON list).
    pub(super) fn aggregate_of(&self, pk: &str, sk: &str) -> Option<String> {
        let h = self.spec();
        let (_, bound) = self.0.classify(pk, sk)?;
        let n = h.pk_arity + h.sk_arity;
        (bound.len() >= n).then(|| encode(&bound[..n]))
    }

    /// The values of an aggregate's id.
    pub(super) fn values(&self, aggregate: &str) -> Vec<String> {
        let h = self.spec();
        if h.pk_arity + h.sk_arity == 1 {
            return vec![aggregate.to_string()];
        }
        serde_json::from_str(aggregate).unwrap_or_default()
    }

    pub(super) fn pk(&self, aggregate: &str) -> String {
        let h = self.spec();
        let root = &self.0.entities[h.root.entity];
        let v = self.values(aggregate);
        root.key[0].template.build(&v[..h.pk_arity.min(v.len())])
    }

    /// The root's sort key, keyed under its owner (`None`: the partition
    /// is the aggregate's).
    pub(super) fn root_sk(&self, aggregate: &str) -> Option<String> {
        let h = self.spec();
        if h.sk_arity == 0 {
            return None;
        }
        let root = &self.0.entities[h.root.entity];
        let v = self.values(aggregate);
        Some(root.key[1].template.build(&v[h.pk_arity.min(v.len())..]))
    }

    /// Where the item at `key` (its image when present) stands in the
    /// history: its root, a member or an entry; `None`: not the history's.
    pub fn place(&self, image: &Item) -> Option<HistoryPlace> {
        let h = self.spec();
        let (role, pk, sk) = self.classify(image).ok()?;
        let aggregate = self.aggregate_of(pk, sk)?;
        let name = |i: usize| self.0.entities[i].name;
        let shown = self.label(&aggregate);
        Some(match role {
            Role::Root => {
                let members: Vec<&str> = h.members.iter().map(|m| name(m.shape.entity)).collect();
                let mirror = image.opt_i64(h.mirror).ok().flatten();
                HistoryPlace {
                    what: format!(
                        "history: the root of the aggregate {shown} ({}): each change of it{} writes a numbered {}; {} = {}",
                        name(h.root.entity),
                        if members.is_empty() {
                            String::new()
                        } else {
                            format!(" and of its members ({})", members.join(", "))
                        },
                        name(h.entries),
                        h.mirror,
                        mirror.map_or("not written yet".to_string(), |n| n.to_string())
                    ),
                    latest_entry: mirror
                        .filter(|n| *n > 0)
                        .map(|n| self.entry_key(&aggregate, n as u64)),
                }
            }
            Role::Member(i) => HistoryPlace {
                what: format!(
                    "history: a member ({}) of the aggregate {shown}: its changes write entries; snapshots list it under {}",
                    name(h.members[i].shape.entity),
                    h.members[i].list
                ),
                latest_entry: None,
            },
            Role::Entry => HistoryPlace {
                what: format!(
                    "history: an entry of the aggregate {shown}, written by the processor {}",
                    h.processor
                ),
                latest_entry: None,
            },
            Role::Other => return None,
        })
    }

    /// How verify's findings name an aggregate: its partition, or its
    /// root's key where the partition holds several.
    pub(super) fn label(&self, aggregate: &str) -> String {
        match self.root_sk(aggregate) {
            Some(sk) => format!("{}/{sk}", self.pk(aggregate)),
            None => self.pk(aggregate),
        }
    }
}

/// An aggregate's id from its values: one value as it is (the ledger keys
/// of a history whose partition is its aggregate's), several as a JSON list.
fn encode(values: &[&str]) -> String {
    match values {
        [one] => one.to_string(),
        _ => serde_json::to_string(values).expect("strings serialise"),
    }
}
