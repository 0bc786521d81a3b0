//! Timelines as a set job (SPEC §5.1): a timeline entry
//! `u#<F>#timeline`/`p#<P>#u#<A>` exists iff F follows A, A's post P exists
//! and P's `ttl` (floor(createdAt) + 7 days) is still ahead.
//!
//! Two scopes, each brought to what consistent reads of the facts imply
//! (the engine writes only the difference, see [`crate::engine::setjob`]):
//!
//! - **post** (created, deleted, re-dated): P's entries on the timelines of
//!   A's followers, one page of followers (the `u#A#follower` mirrors, in
//!   sort key order) per job; the next page is a follow-up job. The
//!   follows themselves are read for the page, so a mirror that lags an
//!   unfollow never adds an entry;
//! - **follow** (created, deleted): A's entries on F's timeline, for every
//!   post of A and every entry by A already there (so entries of posts
//!   deleted meanwhile go too).
//!
//! Guards: a put depends on the follow existing and on the post's
//! `createdAt` as read; a delete on the fact that justifies it (the follow
//! or the post absent, or the post re-dated). So a late or duplicated job
//! never resurrects an entry after an unfollow or a delete, and never
//! removes one a newer follow or post justifies: its guard fails, the write
//! is dropped, and the newer fact's own job (enqueued after it) fixes the
//! scope. Why one of the two jobs always sees both facts: the post job reads
//! the mirrors, which the derive processor writes *before* it enqueues the
//! follow job; so either the post job sees the mirror, or the follow job
//! (sent later) sees the post.
//!
//! Entries are only written while their ttl is ahead; an entry whose ttl
//! has passed is DynamoDB's to delete (never listed, never written).
//! A fact that is bad input keeps the entries it had (what earlier valid
//! states implied stays).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::entities::{self, Post};
use super::keys::{self, Kind};
use super::messages::{decode, encode, TimelineJob};
use super::rules::TIMELINE_QUEUE;
use crate::engine::rules::OutMessage;
use crate::engine::setjob::{BoxFut, Guard, Guarded, Plan, Reads, SetJob};
use crate::item::{n, s, Item, ItemExt};
use crate::sqs::MessageError;

/// Followers per post job (a celebrity's post is several jobs).
pub const FOLLOWERS_PER_JOB: usize = 1000;

/// The timeline consumer.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// Followers per post job.
    pub page: usize,
}

impl Default for Timeline {
    fn default() -> Self {
        Self {
            page: FOLLOWERS_PER_JOB,
        }
    }
}

/// The timeline entry of post `p` on `follower`'s timeline (every attribute).
pub fn entry_item(follower: &str, p: &Post) -> Item {
    let mut item = keys::timeline_key(follower, &p.post_id, &p.author);
    item.insert(keys::TYPE.into(), s(keys::TYPE_TIMELINE));
    item.insert("postId".into(), s(&p.post_id));
    item.insert("authorId".into(), s(&p.author));
    item.insert("createdAt".into(), s(&p.created_at));
    item.insert(keys::TTL.into(), n(p.ttl));
    item
}

/// A fact as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact<T> {
    Absent,
    /// Present but bad input: what it implied before stays.
    Bad,
    Valid(T),
}

/// The post fact of an item as read.
pub fn post_fact(item: Option<&Item>) -> Fact<Post> {
    match item {
        None => Fact::Absent,
        Some(i) => entities::post(i).map_or(Fact::Bad, Fact::Valid),
    }
}

/// The follow fact of an item as read.
pub fn follow_fact(item: Option<&Item>) -> Fact<()> {
    match item {
        None => Fact::Absent,
        Some(i) => entities::follow(i).map_or(Fact::Bad, |_| Fact::Valid(())),
    }
}

/// Whether an entry's own ttl has passed (it is DynamoDB's to delete).
fn expired(entry: &Item, now: DateTime<Utc>) -> bool {
    entry
        .opt_i64(keys::TTL)
        .ok()
        .flatten()
        .is_some_and(|t| t <= now.timestamp())
}

/// Which fact a delete prefers to be guarded by (the one the scope shares).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    Post,
    Follow,
}

/// One (follower, post) pair: the entry it should have and the entry it
/// has, each with the guards of the facts it depends on. Pure.
#[allow(clippy::too_many_arguments)]
pub fn pair(
    follower: &str,
    author: &str,
    post_id: &str,
    follow: &Fact<()>,
    post: &Fact<Post>,
    entry: Option<&Item>,
    now: DateTime<Utc>,
    prefer: Prefer,
) -> (Option<Guarded>, Option<Guarded>) {
    let entry = entry.filter(|e| !expired(e, now));
    let follow_key = keys::follow_key(follower, author);
    let post_key = keys::post_key(author, post_id);
    if follower == author {
        // Never on one's own timeline (unguarded: no fact makes it right).
        let existing = entry.map(|e| Guarded {
            item: e.clone(),
            guards: vec![],
        });
        return (None, existing);
    }
    if matches!(follow, Fact::Bad) || matches!(post, Fact::Bad) {
        // Keep what is there: desired = existing, so nothing is written.
        let keep = entry.map(|e| Guarded {
            item: e.clone(),
            guards: vec![],
        });
        return (keep.clone(), keep);
    }
    let desired = match (follow, post) {
        (Fact::Valid(()), Fact::Valid(p)) if p.ttl > now.timestamp() => Some(Guarded {
            item: entry_item(follower, p),
            guards: vec![
                Guard::exists(follow_key.clone()),
                Guard::equals(post_key.clone(), "createdAt", s(&p.created_at)),
            ],
        }),
        _ => None,
    };
    let existing = entry.map(|e| {
        let follow_gone = matches!(follow, Fact::Absent);
        let post_gone = matches!(post, Fact::Absent);
        let guards = match (follow_gone, post_gone) {
            (true, true) if prefer == Prefer::Post => vec![Guard::absent(post_key.clone())],
            (true, _) => vec![Guard::absent(follow_key.clone())],
            (false, true) => vec![Guard::absent(post_key.clone())],
            // The post is there but re-dated (or expired with the entry
            // not): the delete holds while the post keeps this createdAt.
            (false, false) => match post {
                Fact::Valid(p) => vec![Guard::equals(
                    post_key.clone(),
                    "createdAt",
                    s(&p.created_at),
                )],
                _ => vec![],
            },
        };
        Guarded {
            item: e.clone(),
            guards,
        }
    });
    (desired, existing)
}

fn push(plan: &mut Plan, (desired, existing): (Option<Guarded>, Option<Guarded>)) {
    plan.desired.extend(desired);
    plan.existing.extend(existing);
}

impl Timeline {
    /// One page of a post's entries.
    async fn post_scope(
        &self,
        reads: &Reads,
        author: &str,
        post_id: &str,
        after: Option<&str>,
    ) -> Result<Plan, MessageError> {
        let store = &reads.store;
        let post_item = store
            .get(&reads.table, keys::post_key(author, post_id))
            .await?;
        let post = post_fact(post_item.as_ref());
        let (mirrors, next) = store
            .query_page(
                &reads.table,
                keys::PK,
                &keys::follower_pk(author),
                keys::SK,
                after,
                self.page,
            )
            .await?;
        let followers: Vec<String> = mirrors
            .iter()
            .filter_map(|m| match entities::kind_of(m) {
                Ok(Kind::Follower { follower, .. }) => Some(follower),
                _ => None,
            })
            .collect();
        let follows: BTreeMap<String, Item> = store
            .batch_get(
                &reads.table,
                followers
                    .iter()
                    .map(|f| keys::follow_key(f, author))
                    .collect(),
            )
            .await?
            .into_iter()
            .filter_map(|i| match entities::kind_of(&i) {
                Ok(Kind::Follow { follower, .. }) => Some((follower, i)),
                _ => None,
            })
            .collect();
        let entries: BTreeMap<String, Item> = store
            .batch_get(
                &reads.table,
                followers
                    .iter()
                    .map(|f| keys::timeline_key(f, post_id, author))
                    .collect(),
            )
            .await?
            .into_iter()
            .filter_map(|i| match entities::kind_of(&i) {
                Ok(Kind::Timeline { follower, .. }) => Some((follower, i)),
                _ => None,
            })
            .collect();
        let mut plan = Plan::default();
        for f in &followers {
            push(
                &mut plan,
                pair(
                    f,
                    author,
                    post_id,
                    &follow_fact(follows.get(f)),
                    &post,
                    entries.get(f),
                    reads.now,
                    Prefer::Post,
                ),
            );
        }
        if let Some(after) = next {
            plan.then.push(OutMessage {
                queue: TIMELINE_QUEUE,
                body: encode(&TimelineJob::Post {
                    author_id: author.to_string(),
                    post_id: post_id.to_string(),
                    after: Some(after),
                }),
            });
        }
        Ok(plan)
    }

    /// The author's entries on the follower's timeline.
    async fn follow_scope(
        &self,
        reads: &Reads,
        follower: &str,
        author: &str,
    ) -> Result<Plan, MessageError> {
        let store = &reads.store;
        let follow_item = store
            .get(&reads.table, keys::follow_key(follower, author))
            .await?;
        let follow = follow_fact(follow_item.as_ref());
        let mut posts: BTreeMap<String, Fact<Post>> = BTreeMap::new();
        for p in store
            .query_partition(&reads.table, keys::PK, &keys::post_pk(author), None)
            .await?
        {
            if let Ok(Kind::Post { post, .. }) = entities::kind_of(&p) {
                posts.insert(post, post_fact(Some(&p)));
            }
        }
        let mut entries: BTreeMap<String, Item> = BTreeMap::new();
        for e in store
            .query_partition(&reads.table, keys::PK, &keys::timeline_pk(follower), None)
            .await?
        {
            if let Ok(Kind::Timeline {
                post, author: a, ..
            }) = entities::kind_of(&e)
            {
                if a == author {
                    entries.insert(post, e);
                }
            }
        }
        let ids: BTreeSet<&String> = posts.keys().chain(entries.keys()).collect();
        let mut plan = Plan::default();
        for id in ids {
            push(
                &mut plan,
                pair(
                    follower,
                    author,
                    id,
                    &follow,
                    posts.get(id).unwrap_or(&Fact::Absent),
                    entries.get(id),
                    reads.now,
                    Prefer::Follow,
                ),
            );
        }
        Ok(plan)
    }
}

impl SetJob for Timeline {
    fn name(&self) -> &'static str {
        "timeline"
    }

    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>> {
        Box::pin(async move {
            match decode(body)? {
                TimelineJob::Post {
                    author_id,
                    post_id,
                    after,
                } => {
                    self.post_scope(reads, &author_id, &post_id, after.as_deref())
                        .await
                }
                TimelineJob::Follow {
                    follower_id,
                    author_id,
                } => self.follow_scope(reads, &follower_id, &author_id).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::setjob::Cond;
    use crate::models::social::entities::tests::{follow_item, post_item, P1, T1};

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    /// T1 = 1_772_359_200.250: its posts live until 1_772_964_000.
    const TTL1: i64 = 1_772_359_200 + 604_800;

    fn now() -> DateTime<Utc> {
        at(1_772_400_000)
    }

    fn post() -> Post {
        entities::post(&post_item("a", P1, T1)).unwrap()
    }

    fn run(
        follow: Fact<()>,
        post: Fact<Post>,
        entry: Option<&Item>,
        now: DateTime<Utc>,
    ) -> (Option<Guarded>, Option<Guarded>) {
        pair("f", "a", P1, &follow, &post, entry, now, Prefer::Post)
    }

    #[test]
    fn entry_item_is_exact() {
        let e = entry_item("f", &post());
        assert_eq!(e["PK"], s("u#f#timeline"));
        assert_eq!(e["SK"], s(format!("p#{P1}#u#a")));
        assert_eq!(e["type"], s("timeline"));
        assert_eq!(e["postId"], s(P1));
        assert_eq!(e["authorId"], s("a"));
        assert_eq!(e["createdAt"], s(T1), "the post's, verbatim");
        assert_eq!(e["ttl"], n(TTL1));
        assert_eq!(e.len(), 7);
    }

    #[test]
    fn follow_and_live_post_want_an_entry_guarded_by_both() {
        let (desired, existing) = run(Fact::Valid(()), Fact::Valid(post()), None, now());
        let d = desired.unwrap();
        assert_eq!(d.item, entry_item("f", &post()));
        assert_eq!(
            d.guards,
            vec![
                Guard::exists(keys::follow_key("f", "a")),
                Guard::equals(keys::post_key("a", P1), "createdAt", s(T1)),
            ]
        );
        assert!(existing.is_none());
    }

    #[test]
    fn entries_are_written_only_while_their_ttl_is_ahead() {
        let (desired, _) = run(Fact::Valid(()), Fact::Valid(post()), None, at(TTL1));
        assert!(desired.is_none(), "ttl reached: never written");
        let (desired, _) = run(Fact::Valid(()), Fact::Valid(post()), None, at(TTL1 - 1));
        assert!(desired.is_some());
        // An expired entry is DynamoDB's: neither kept nor deleted by us.
        let e = entry_item("f", &post());
        let (desired, existing) = run(Fact::Absent, Fact::Valid(post()), Some(&e), at(TTL1));
        assert!(desired.is_none() && existing.is_none());
    }

    #[test]
    fn deletes_are_guarded_by_the_fact_that_justifies_them() {
        let e = entry_item("f", &post());
        // Unfollowed.
        let (d, x) = run(Fact::Absent, Fact::Valid(post()), Some(&e), now());
        assert!(d.is_none());
        assert_eq!(
            x.unwrap().guards,
            vec![Guard::absent(keys::follow_key("f", "a"))]
        );
        // Post deleted.
        let (d, x) = run(Fact::Valid(()), Fact::Absent, Some(&e), now());
        assert!(d.is_none());
        assert_eq!(
            x.unwrap().guards,
            vec![Guard::absent(keys::post_key("a", P1))]
        );
        // Both gone: the scope's shared fact.
        let (_, x) = run(Fact::Absent, Fact::Absent, Some(&e), now());
        assert_eq!(
            x.unwrap().guards,
            vec![Guard::absent(keys::post_key("a", P1))]
        );
        let (_, x) = pair(
            "f",
            "a",
            P1,
            &Fact::Absent,
            &Fact::Absent,
            Some(&e),
            now(),
            Prefer::Follow,
        );
        assert_eq!(
            x.unwrap().guards,
            vec![Guard::absent(keys::follow_key("f", "a"))]
        );
        // Post re-dated into the past: the live entry goes while the post
        // keeps its new date.
        let old = entities::post(&post_item("a", P1, "2026-01-01T00:00:00Z")).unwrap();
        let (d, x) = run(Fact::Valid(()), Fact::Valid(old), Some(&e), now());
        assert!(d.is_none());
        let g = x.unwrap().guards;
        assert_eq!(g.len(), 1);
        assert_eq!(
            g[0].cond,
            Cond::Equals("createdAt", s("2026-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn bad_facts_keep_what_is_there() {
        let e = entry_item("f", &post());
        let (d, x) = run(Fact::Bad, Fact::Valid(post()), Some(&e), now());
        assert_eq!(d, x, "kept as is: nothing to write");
        assert!(d.is_some());
        let (d, x) = run(Fact::Valid(()), Fact::Bad, None, now());
        assert!(d.is_none() && x.is_none(), "nothing created from bad input");
    }

    #[test]
    fn never_on_ones_own_timeline() {
        let (d, x) = pair(
            "a",
            "a",
            P1,
            &Fact::Valid(()),
            &Fact::Valid(post()),
            None,
            now(),
            Prefer::Post,
        );
        assert!(d.is_none() && x.is_none());
    }

    #[test]
    fn facts_as_read() {
        assert_eq!(post_fact(None), Fact::Absent);
        assert_eq!(post_fact(Some(&post_item("a", P1, "later"))), Fact::Bad);
        assert_eq!(
            post_fact(Some(&post_item("a", P1, T1))),
            Fact::Valid(post())
        );
        assert_eq!(
            follow_fact(Some(&follow_item("f", "a", T1))),
            Fact::Valid(())
        );
        assert_eq!(follow_fact(Some(&follow_item("a", "a", T1))), Fact::Bad);
        assert_eq!(follow_fact(None), Fact::Absent);
    }
}
