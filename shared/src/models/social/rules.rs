//! The social network's stream rules (SPEC §5.1), over the engine's
//! vocabulary:
//!
//! - a follow A->B implies the follower mirror `u#B#follower`/`u#A`
//!   (`createdAt` copied) and contributes `following` +1 to A's counts and
//!   `followers` +1 to B's;
//! - a post contributes `posts` +1 to its author's counts;
//! - a like contributes `likes` +1 to the post's like count item. The engine
//!   sums contributions in the ledger and sets each counter item once per
//!   batch, so a burst of likes is one write of the like count (coalesced);
//! - the user counts and like count items are counters created by the
//!   processor (`type` stamped), kept at 0, never removed;
//! - posts and follows start timeline jobs (see [`super::timeline`]); the
//!   processors' own mirrors and timeline entries (their TTL expiry
//!   included) imply nothing and are skipped unread.
//!
//! Every aspect validates the whole item through [`entities::parse`]: bad
//! input errs in every aspect, so nothing changes for that record.

use super::entities::{self, Entity, Follow};
use super::keys::{self, Kind};
use super::messages::{encode, TimelineJob};
use crate::change::{Change, ChangeKind};
use crate::engine::rules::{Contribution, Counter, OutMessage, Projection, Rules};
use crate::error::InputError;
use crate::item::{s, Item, ItemExt};

/// Logical name of the timeline queue.
pub const TIMELINE_QUEUE: &str = "timeline";

/// The social network's rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct SocialRules;

/// A user's counts item (`u#<id>`/`count`): followers, following, posts.
pub fn user_counter(user: &str) -> Counter {
    Counter {
        key: vec![
            (keys::PK, keys::user(user)),
            (keys::SK, keys::COUNT_SK.to_string()),
        ],
        attrs: &[keys::FOLLOWERS, keys::FOLLOWING, keys::POSTS],
        create: Some(vec![(keys::TYPE, s(keys::TYPE_COUNTS))]),
        remove_at_zero: false,
    }
}

/// A post's like count item (`p#<postId>#likecount`/`count`).
pub fn likecount_counter(post_id: &str) -> Counter {
    Counter {
        key: vec![
            (keys::PK, keys::likecount_pk(post_id)),
            (keys::SK, keys::COUNT_SK.to_string()),
        ],
        attrs: &[keys::LIKES],
        create: Some(vec![(keys::TYPE, s(keys::TYPE_LIKECOUNT))]),
        remove_at_zero: false,
    }
}

/// The follower mirror of a follow (every attribute).
pub fn mirror_item(f: &Follow) -> Item {
    let mut item = keys::mirror_key(&f.follower, &f.followed);
    item.insert(keys::TYPE.into(), s(keys::TYPE_FOLLOWER));
    item.insert("createdAt".into(), s(&f.created_at));
    item
}

fn timeline(job: TimelineJob) -> OutMessage {
    OutMessage {
        queue: TIMELINE_QUEUE,
        body: encode(&job),
    }
}

fn key_kind(keys_item: &Item) -> Option<Kind> {
    keys::kind(keys_item.s(keys::PK).ok()?, keys_item.s(keys::SK).ok()?)
}

impl Rules for SocialRules {
    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    /// No projections (the seed has no index); validates the item so that
    /// bad input is reported by every aspect.
    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError> {
        entities::parse(image)?;
        Ok(None)
    }

    fn derived(&self, image: &Item) -> Result<Vec<Item>, InputError> {
        Ok(match entities::parse(image)? {
            Entity::Follow(f) => vec![mirror_item(&f)],
            _ => vec![],
        })
    }

    fn contributions(&self, image: &Item) -> Result<Vec<Contribution>, InputError> {
        Ok(match entities::parse(image)? {
            Entity::Follow(f) => vec![
                Contribution {
                    counter: user_counter(&f.follower),
                    values: vec![(keys::FOLLOWING, 1)],
                },
                Contribution {
                    counter: user_counter(&f.followed),
                    values: vec![(keys::FOLLOWERS, 1)],
                },
            ],
            Entity::Post(p) => vec![Contribution {
                counter: user_counter(&p.author),
                values: vec![(keys::POSTS, 1)],
            }],
            Entity::Like(l) => vec![Contribution {
                counter: likecount_counter(&l.post_id),
                values: vec![(keys::LIKES, 1)],
            }],
            Entity::UserInfo(_) | Entity::Processor(_) => vec![],
        })
    }

    /// From the key alone.
    fn counter(&self, image: &Item) -> Option<Counter> {
        match key_kind(image)? {
            Kind::UserCounts { user } => Some(user_counter(&user)),
            Kind::LikeCount { post } => Some(likecount_counter(&post)),
            _ => None,
        }
    }

    /// Timeline jobs: a post created, deleted or re-dated fans out over the
    /// author's followers; a follow created or deleted reconciles the
    /// author's entries on the follower's timeline. A change that leaves
    /// what the timeline reads unchanged starts nothing. A REMOVE needs only
    /// the keys (the job re-reads the facts).
    fn messages(&self, change: &Change) -> Result<Vec<OutMessage>, InputError> {
        let Some(kind) = key_kind(&change.keys) else {
            return Err(InputError::UnknownEntity {
                key: crate::item::display_key(&change.keys),
            });
        };
        let job = match kind {
            Kind::Post { author, post } => TimelineJob::Post {
                author_id: author,
                post_id: post,
                after: None,
            },
            Kind::Follow { follower, followed } if follower != followed => TimelineJob::Follow {
                follower_id: follower,
                author_id: followed,
            },
            _ => {
                // Validate what is there, start nothing.
                if let Some(new) = &change.new {
                    entities::parse(new)?;
                }
                return Ok(vec![]);
            }
        };
        if change.kind == ChangeKind::Remove {
            return Ok(vec![timeline(job)]);
        }
        let new = change.new.as_ref().ok_or_else(|| InputError::Invalid {
            key: change.key_display(),
            reason: "no new image".into(),
        })?;
        let new = entities::parse(new)?;
        let old = change.old.as_ref().map(entities::parse);
        let same = match (old, &new) {
            // Only createdAt matters to entries (ttl, copied attribute).
            (Some(Ok(Entity::Post(o))), Entity::Post(n)) => o.created_at == n.created_at,
            // A follow's createdAt is not on timeline entries.
            (Some(Ok(Entity::Follow(_))), Entity::Follow(_)) => true,
            _ => false,
        };
        Ok(if same { vec![] } else { vec![timeline(job)] })
    }

    /// Follower mirrors are what follows imply.
    fn is_derived(&self, key: &Item) -> bool {
        matches!(key_kind(key), Some(Kind::Follower { .. }))
    }

    /// Mirrors and timeline entries (including their TTL expiry) imply
    /// nothing. Counter items are read so that a writer's overwrite is
    /// brought back to the sums.
    fn ignores(&self, keys_item: &Item) -> bool {
        matches!(
            key_kind(keys_item),
            Some(Kind::Follower { .. } | Kind::Timeline { .. })
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{test_change as change, Origin};
    use crate::item::n;
    use crate::models::social::entities::tests::{
        follow_item, like_item, post_item, user_info, P1, T1,
    };

    fn bodies(c: Change) -> Vec<serde_json::Value> {
        SocialRules
            .messages(&c)
            .unwrap()
            .into_iter()
            .map(|m| {
                assert_eq!(m.queue, "timeline");
                serde_json::from_str(&m.body).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_follow_implies_its_mirror_exactly() {
        let d = SocialRules.derived(&follow_item("a", "b", T1)).unwrap();
        assert_eq!(d.len(), 1);
        let m = &d[0];
        assert_eq!(m["PK"], s("u#b#follower"));
        assert_eq!(m["SK"], s("u#a"));
        assert_eq!(m["type"], s("follower"));
        assert_eq!(m["createdAt"], s(T1));
        assert_eq!(m.len(), 4);
        // Only follows imply items.
        assert!(SocialRules
            .derived(&post_item("a", P1, T1))
            .unwrap()
            .is_empty());
        assert!(SocialRules.derived(&like_item(P1, "a")).unwrap().is_empty());
        assert!(SocialRules.derived(&user_info("a")).unwrap().is_empty());
    }

    #[test]
    fn contributions_of_follows_posts_and_likes() {
        let c = SocialRules
            .contributions(&follow_item("a", "b", T1))
            .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].counter.key_item(), keys::user_counts_key("a"));
        assert_eq!(c[0].values, vec![("following", 1)]);
        assert_eq!(c[1].counter.key_item(), keys::user_counts_key("b"));
        assert_eq!(c[1].values, vec![("followers", 1)]);
        let c = SocialRules.contributions(&post_item("a", P1, T1)).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].counter.key_item(), keys::user_counts_key("a"));
        assert_eq!(c[0].values, vec![("posts", 1)]);
        let c = SocialRules.contributions(&like_item(P1, "u")).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].counter.key_item(), keys::likecount_key(P1));
        assert_eq!(c[0].values, vec![("likes", 1)]);
        assert!(SocialRules
            .contributions(&user_info("a"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn counters_are_created_stamped_and_kept_at_zero() {
        let u = user_counter("a");
        assert_eq!(u.attrs, &["followers", "following", "posts"]);
        assert_eq!(u.create, Some(vec![("type", s("counts"))]));
        assert!(!u.remove_at_zero);
        let l = likecount_counter(P1);
        assert_eq!(l.attrs, &["likes"]);
        assert_eq!(l.create, Some(vec![("type", s("likecount"))]));
        assert!(!l.remove_at_zero);
        // Recognised from key-only items.
        assert_eq!(
            SocialRules.counter(&keys::user_counts_key("a")),
            Some(user_counter("a"))
        );
        assert_eq!(
            SocialRules.counter(&keys::likecount_key(P1)),
            Some(likecount_counter(P1))
        );
        assert_eq!(SocialRules.counter(&keys::user_info_key("a")), None);
        assert_eq!(SocialRules.counter(&keys::follow_key("a", "b")), None);
        // A counter item written over by a writer still parses (it is ours).
        let mut counts = keys::user_counts_key("a");
        counts.insert("followers".into(), s("many"));
        assert!(SocialRules.contributions(&counts).unwrap().is_empty());
    }

    #[test]
    fn bad_input_errs_in_every_aspect() {
        for bad in [
            follow_item("a", "a", T1),
            follow_item("a", "b", "2026-13-01T00:00:00Z"),
            post_item("a", "not-a-ulid", T1),
            like_item("p1", "u"),
            crate::models::social::entities::tests::item(&[("PK", s("u#a")), ("SK", s("avatar"))]),
        ] {
            assert!(SocialRules.projection(&bad).is_err());
            assert!(SocialRules.derived(&bad).is_err());
            assert!(SocialRules.contributions(&bad).is_err());
            assert!(SocialRules
                .messages(&change(ChangeKind::Insert, None, Some(bad.clone())))
                .is_err());
        }
    }

    #[test]
    fn processor_items_are_skipped_unread() {
        assert!(SocialRules.ignores(&keys::mirror_key("a", "b")));
        assert!(SocialRules.ignores(&keys::timeline_key("f", P1, "a")));
        assert!(!SocialRules.ignores(&keys::user_counts_key("a")));
        assert!(!SocialRules.ignores(&keys::likecount_key(P1)));
        assert!(!SocialRules.ignores(&keys::follow_key("a", "b")));
    }

    #[test]
    fn posts_fan_out_on_insert_delete_and_redate_only() {
        let p = post_item("a", P1, T1);
        let job = serde_json::json!({"version":1,"kind":"post","authorId":"a","postId":P1});
        assert_eq!(
            bodies(change(ChangeKind::Insert, None, Some(p.clone()))),
            vec![job.clone()]
        );
        assert_eq!(
            bodies(change(ChangeKind::Remove, Some(p.clone()), None)),
            vec![job.clone()]
        );
        let mut edited = p.clone();
        edited.insert("body".into(), s("edited"));
        assert!(bodies(change(ChangeKind::Modify, Some(p.clone()), Some(edited))).is_empty());
        let redated = post_item("a", P1, "2026-03-02T00:00:00Z");
        assert_eq!(
            bodies(change(ChangeKind::Modify, Some(p.clone()), Some(redated))),
            vec![job.clone()]
        );
        // Repaired bad input fans out.
        let mut broken = p.clone();
        broken.remove("body");
        assert_eq!(
            bodies(change(ChangeKind::Modify, Some(broken), Some(p))),
            vec![job]
        );
    }

    #[test]
    fn follows_and_unfollows_reconcile_the_pair() {
        let f = follow_item("f", "a", T1);
        let job = serde_json::json!({"version":1,"kind":"follow","followerId":"f","authorId":"a"});
        assert_eq!(
            bodies(change(ChangeKind::Insert, None, Some(f.clone()))),
            vec![job.clone()]
        );
        assert_eq!(
            bodies(change(ChangeKind::Remove, Some(f.clone()), None)),
            vec![job]
        );
        let later = follow_item("f", "a", "2026-03-05T00:00:00Z");
        assert!(bodies(change(ChangeKind::Modify, Some(f), Some(later))).is_empty());
        // A self-follow (bad input) removed starts nothing.
        let selfish = follow_item("a", "a", T1);
        assert!(bodies(change(ChangeKind::Remove, Some(selfish), None)).is_empty());
    }

    #[test]
    fn likes_counts_and_timeline_expiry_start_nothing() {
        assert!(bodies(change(ChangeKind::Insert, None, Some(like_item(P1, "u")))).is_empty());
        assert!(bodies(change(ChangeKind::Insert, None, Some(user_info("u")))).is_empty());
        let mut counts = keys::user_counts_key("a");
        counts.insert("followers".into(), n(1));
        assert!(bodies(change(ChangeKind::Modify, None, Some(counts))).is_empty());
        let mut entry = keys::timeline_key("f", P1, "a");
        entry.insert("ttl".into(), n(1));
        let mut expired = change(ChangeKind::Remove, Some(entry), None);
        expired.origin = Origin::TtlExpiry;
        assert!(bodies(expired).is_empty());
    }
}
