//! The member deletes a deletion's cascade defers while the root is back
//! (pending parts of the fold's state, settled by the member's own record
//! or the root's re-creation), and which records decide a member's fate.

use aws_sdk_dynamodb::types::AttributeValue;

use super::{CascadeDelete, FoldRules, FoldState};
use crate::change::Change;
use crate::item::Item;
use crate::ledger;

/// Prefix of a pending part's name: a member of a deleted incarnation
/// whose cascade waits ([`super::Cascaded::deferred`]), held as `{ key, unchanged }`.
/// Rules never read such parts: they exist only while the root is deleted,
/// and are settled before its re-creation is folded.
pub const PENDING: &str = "!";

/// The pending part of a deferred member delete: (name, data).
pub(super) fn pending_part(d: &CascadeDelete) -> (String, Item) {
    let mut data: Item = [("key".to_string(), AttributeValue::M(d.key.clone()))].into();
    if let Some(u) = &d.unchanged {
        data.insert("unchanged".into(), AttributeValue::M(u.clone()));
    }
    (format!("{PENDING}{}", ledger::item_id(&d.key)), data)
}

/// The pending member deletes of `state`: (part name, its key's id, the
/// delete). Asked of every record: the parts are read from the prefix on
/// only (none in all but a deleted root's state).
pub(super) fn pending_of(state: &FoldState) -> Vec<(String, String, CascadeDelete)> {
    state
        .parts
        .range::<str, _>((
            std::ops::Bound::Included(PENDING),
            std::ops::Bound::Unbounded,
        ))
        .map_while(|(name, data)| Some((name, name.strip_prefix(PENDING)?, data)))
        .filter_map(|(name, id, data)| {
            let Some(AttributeValue::M(key)) = data.get("key") else {
                return None;
            };
            let unchanged = match data.get("unchanged") {
                Some(AttributeValue::M(u)) => Some(u.clone()),
                _ => None,
            };
            Some((
                name.clone(),
                id.to_string(),
                CascadeDelete {
                    key: key.clone(),
                    unchanged,
                },
            ))
        })
        .collect()
}

/// The ids ([`ledger::item_id`]) of the items `records` write or remove,
/// by their writer: a record that changes nothing its writer wrote (a
/// processor's projection onto a member, the mirror) decides nothing of
/// the item's fate ([`FoldRules::writes_nothing`]; user11's finding 3: a
/// projection's record after a root's deletion kept its members from the
/// cascade for good).
pub(super) fn written_by<R: FoldRules + ?Sized>(
    rules: &R,
    records: &[&Change],
) -> std::collections::HashSet<String> {
    records
        .iter()
        .filter(|c| !rules.writes_nothing(c))
        .map(|c| ledger::item_id(&c.keys))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{n, s};

    fn key(sk: &str) -> Item {
        [("PK".to_string(), s("ORDER#o1")), ("SK".to_string(), s(sk))].into()
    }

    /// A deferred member delete kept as a pending part reads back as the
    /// same delete, beside the rules' parts (which it never shadows).
    #[test]
    fn a_pending_member_delete_reads_back_from_the_state() {
        let guarded = CascadeDelete {
            key: key("LINE#1"),
            unchanged: Some([("quantity".to_string(), n(2))].into()),
        };
        let open = CascadeDelete {
            key: key("LINE#2"),
            unchanged: None,
        };
        let mut state = FoldState::default();
        for part in ["ORDER", "LINE#1", "?LINE#3", " odd"] {
            state.parts.insert(part.to_string(), Item::new());
        }
        for d in [&guarded, &open] {
            let (name, data) = pending_part(d);
            assert!(name.starts_with(PENDING), "{name}");
            state.parts.insert(name, data);
        }
        let pending = pending_of(&state);
        assert_eq!(pending.len(), 2, "{pending:?}");
        for (d, (name, id, back)) in [&guarded, &open].into_iter().zip(&pending) {
            assert_eq!(back, d);
            assert_eq!(id, &ledger::item_id(&d.key));
            assert_eq!(name, &format!("{PENDING}{id}"));
        }
        state.parts.retain(|name, _| !name.starts_with(PENDING));
        assert!(pending_of(&state).is_empty());
    }
}
