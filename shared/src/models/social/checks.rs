//! `verify` for timelines: the entries a scan of the table implies (every
//! valid follow x every valid post of the followed user whose ttl is ahead)
//! against the entries there. Mirrors and counts are checked generically by
//! the engine (they follow from the rules).
//!
//! Each finding is repaired by running the pair's follow job through the
//! timeline consumer (its guards included); an entry whose key cannot be
//! read is deleted if unchanged. Entries past their ttl are DynamoDB's and
//! never reported; pairs whose follow or post is bad input are not drift.

use std::collections::{BTreeMap, BTreeSet};

use super::entities::{self, Entity, Post};
use super::keys::{self, Kind};
use super::messages::{encode, TimelineJob};
use super::rules::TIMELINE_QUEUE;
use super::timeline::entry_item;
use crate::item::{display_key, key_of, Item, ItemExt};
use crate::models::{CheckInput, Drift, Finding, Repair};

const KIND: &str = "timeline";

fn repair(follower: &str, author: &str) -> Option<Repair> {
    Some(Repair::Job {
        queue: TIMELINE_QUEUE,
        body: encode(&TimelineJob::Follow {
            follower_id: follower.to_string(),
            author_id: author.to_string(),
        }),
    })
}

/// What the scanned facts say.
#[derive(Default)]
struct Facts {
    /// followed -> followers (valid follows).
    followers: BTreeMap<String, BTreeSet<String>>,
    /// (follower, followed) pairs whose follow is bad input.
    bad_follows: BTreeSet<(String, String)>,
    /// author -> valid posts.
    posts: BTreeMap<String, Vec<Post>>,
    /// (author, post id) of posts that are bad input.
    bad_posts: BTreeSet<(String, String)>,
}

fn facts(items: &[Item]) -> Facts {
    let mut out = Facts::default();
    for item in items {
        let Ok(kind) = entities::kind_of(item) else {
            continue;
        };
        match (kind, entities::parse(item)) {
            (_, Ok(Entity::Follow(f))) => {
                out.followers
                    .entry(f.followed)
                    .or_default()
                    .insert(f.follower);
            }
            (_, Ok(Entity::Post(p))) => out.posts.entry(p.author.clone()).or_default().push(p),
            (Kind::Follow { follower, followed }, Err(_)) => {
                out.bad_follows.insert((follower, followed));
            }
            (Kind::Post { author, post }, Err(_)) => {
                out.bad_posts.insert((author, post));
            }
            _ => {}
        }
    }
    out
}

/// Timeline drift: missing, extra and wrong entries.
pub fn check(input: &CheckInput<'_>) -> Vec<Finding> {
    let now = input.now.timestamp();
    let facts = facts(input.items);
    let mut expected: BTreeMap<(String, String, String), Item> = BTreeMap::new();
    for (author, posts) in &facts.posts {
        let Some(followers) = facts.followers.get(author) else {
            continue;
        };
        for p in posts.iter().filter(|p| p.ttl > now) {
            for f in followers.iter().filter(|f| *f != author) {
                expected.insert(
                    (f.clone(), author.clone(), p.post_id.clone()),
                    entry_item(f, p),
                );
            }
        }
    }
    let mut findings = Vec::new();
    let mut seen = BTreeSet::new();
    for item in input.items {
        let pk = item.s(keys::PK).unwrap_or_default();
        let sk = item.s(keys::SK).unwrap_or_default();
        let key = display_key(&key_of(item, &[keys::PK, keys::SK]));
        let kind = keys::kind(pk, sk);
        if kind.is_none() && pk.ends_with("#timeline") {
            findings.push(Finding {
                kind: KIND,
                drift: Drift::Extra,
                what: format!("{key}: not a timeline entry key"),
                repair: Some(Repair::DeleteIfUnchanged(item.clone())),
            });
            continue;
        }
        let Some(Kind::Timeline {
            follower,
            post,
            author,
        }) = kind
        else {
            continue;
        };
        let expired = item
            .opt_i64(keys::TTL)
            .ok()
            .flatten()
            .is_some_and(|t| t <= now);
        if expired
            || facts
                .bad_follows
                .contains(&(follower.clone(), author.clone()))
            || facts.bad_posts.contains(&(author.clone(), post.clone()))
        {
            seen.insert((follower, author, post));
            continue;
        }
        let id = (follower.clone(), author.clone(), post.clone());
        match expected.get(&id) {
            None => findings.push(Finding {
                kind: KIND,
                drift: Drift::Extra,
                what: format!("{key}: no follow of the author or no live post"),
                repair: repair(&follower, &author),
            }),
            Some(want) if want != item => findings.push(Finding {
                kind: KIND,
                drift: Drift::Wrong,
                what: format!("{key}: attributes differ from the post's"),
                repair: repair(&follower, &author),
            }),
            Some(_) => {}
        }
        seen.insert(id);
    }
    for (id, want) in &expected {
        if !seen.contains(id) {
            let (follower, author, _) = id;
            findings.push(Finding {
                kind: KIND,
                drift: Drift::Missing,
                what: format!(
                    "{}: missing",
                    display_key(&key_of(want, &[keys::PK, keys::SK]))
                ),
                repair: repair(follower, author),
            });
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{n, s};
    use crate::models::social::entities::tests::{follow_item, post_item, P1, T1};
    use chrono::DateTime;

    const TTL1: i64 = 1_772_359_200 + 604_800;

    fn run(items: &[Item], now: i64) -> Vec<(Drift, String)> {
        check(&CheckInput {
            items,
            ledger: &[],
            now: DateTime::from_timestamp(now, 0).unwrap(),
        })
        .into_iter()
        .map(|f| {
            assert_eq!(f.kind, "timeline");
            (f.drift, f.what)
        })
        .collect()
    }

    fn entry() -> Item {
        entry_item("f", &entities::post(&post_item("a", P1, T1)).unwrap())
    }

    #[test]
    fn exact_timelines_have_no_findings() {
        let items = vec![follow_item("f", "a", T1), post_item("a", P1, T1), entry()];
        assert!(run(&items, TTL1 - 10).is_empty());
        // Past the ttl: nothing expected, the leftover entry is DynamoDB's.
        assert!(run(&items, TTL1).is_empty());
        assert!(run(&items[..2], TTL1).is_empty());
    }

    #[test]
    fn missing_extra_and_wrong_entries_are_found_with_their_repair() {
        let now = TTL1 - 10;
        let missing = run(&[follow_item("f", "a", T1), post_item("a", P1, T1)], now);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].0, Drift::Missing);
        let extra = run(&[post_item("a", P1, T1), entry()], now);
        assert_eq!(extra.len(), 1);
        assert_eq!(extra[0].0, Drift::Extra);
        let mut wrong = entry();
        wrong.insert("ttl".into(), n(TTL1 + 5));
        let found = run(
            &[follow_item("f", "a", T1), post_item("a", P1, T1), wrong],
            now,
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, Drift::Wrong);
        let f = check(&CheckInput {
            items: &[post_item("a", P1, T1), entry()],
            ledger: &[],
            now: DateTime::from_timestamp(now, 0).unwrap(),
        });
        assert_eq!(
            f[0].repair,
            Some(Repair::Job {
                queue: "timeline",
                body: r#"{"authorId":"a","followerId":"f","kind":"follow","version":1}"#.into()
            })
        );
        let garbage = crate::models::social::entities::tests::item(&[
            ("PK", s("u#f#timeline")),
            ("SK", s("junk")),
        ]);
        let f = check(&CheckInput {
            items: std::slice::from_ref(&garbage),
            ledger: &[],
            now: DateTime::from_timestamp(now, 0).unwrap(),
        });
        assert_eq!(f[0].repair, Some(Repair::DeleteIfUnchanged(garbage)));
    }

    #[test]
    fn bad_input_is_not_drift() {
        let now = TTL1 - 10;
        let mut bad_post = post_item("a", P1, T1);
        bad_post.remove("body");
        assert!(run(&[follow_item("f", "a", T1), bad_post, entry()], now).is_empty());
        assert!(run(
            &[
                follow_item("f", "a", "bad"),
                post_item("a", P1, T1),
                entry()
            ],
            now
        )
        .is_empty());
        // A self-follow implies no entry.
        assert!(run(&[follow_item("a", "a", T1), post_item("a", P1, T1)], now).is_empty());
    }
}
