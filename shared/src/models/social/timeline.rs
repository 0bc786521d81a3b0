//! Timelines as a join set job (SPEC §5.1, [`crate::engine::joinset`]): a
//! timeline entry `u#<f>#timeline`/`p#<p>#u#<a>` exists iff the follow
//! `f -> a` exists, a's post `p` exists, its `ttl` (floor(createdAt) + 7
//! days) is ahead, and `f != a`. Values: `postId`, `authorId`, the post's
//! `createdAt` (verbatim), `ttl`.
//!
//! The scopes follow from the key templates ([`declaration`]):
//!
//! - **post** (created, deleted, re-dated; binds `a`, `p`): the followers
//!   `f` are listed from the follower mirrors `u#<a>#follower`, a page per
//!   job, the next page enqueued before this one's writes; the follows
//!   themselves are read, so a mirror that lags an unfollow adds nothing;
//! - **follow** (created, deleted; binds `f`, `a`): a's posts, paged, then
//!   the entries by `a` on f's timeline, paged (entries of posts deleted
//!   meanwhile go too).
//!
//! Every put is guarded by the follow existing and the post's `createdAt`
//! as read; a delete by the fact that justifies it (preferring the scope's
//! own fact, one check per transaction chunk). Why one of the two jobs
//! always sees both facts: the post job reads the mirrors, which the derive
//! processor writes *before* it enqueues the follow job; so either the post
//! job sees the mirror, or the follow job (sent later) sees the post.
//!
//! The jobs the stream rules start are the versioned [`TimelineJob`] bodies;
//! follow-up pages are generic join set bodies ([`JoinJob`]). Both are read.

use std::sync::Arc;

use crate::engine::joinset::{
    plan_scope, FactDecl, JoinJob, JoinSet, KeyTemplate, TargetDecl, Value, Vars, When,
    DEFAULT_PAGE,
};
use crate::engine::setjob::{BoxFut, Plan, Reads, SetJob};
use crate::item::{n, s, Item};
use crate::sqs::MessageError;

use super::entities::{self, Post};
use super::keys;
use super::messages::{decode, TimelineJob};
use super::rules::TIMELINE_QUEUE;

/// Followers per post job (a celebrity's post is several jobs).
pub const FOLLOWERS_PER_JOB: usize = DEFAULT_PAGE;

/// The timeline consumer.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// Candidates per job (followers of a post; posts or entries of a follow).
    pub page: usize,
}

impl Default for Timeline {
    fn default() -> Self {
        Self {
            page: FOLLOWERS_PER_JOB,
        }
    }
}

fn template(pk: &str, sk: &str) -> KeyTemplate {
    KeyTemplate::parse(pk, sk).expect("the timeline's templates are valid")
}

/// The timeline as a join set (plain data: what a model file's `sets:`
/// block declares).
pub fn declaration(page: usize) -> JoinSet {
    JoinSet {
        name: "timeline",
        queue: TIMELINE_QUEUE,
        key_names: &[keys::PK, keys::SK],
        target: TargetDecl {
            key: template("u#${f}#timeline", "p#${p}#u#${a}"),
            type_attr: Some((keys::TYPE, keys::TYPE_TIMELINE.to_string())),
            values: vec![
                ("postId".into(), Value::Var("p".into())),
                ("authorId".into(), Value::Var("a".into())),
                (
                    "createdAt".into(),
                    Value::Attr {
                        fact: "post".into(),
                        attr: "createdAt".into(),
                    },
                ),
            ],
            ttl: Some((
                keys::TTL,
                Value::Computed(Arc::new(|row| {
                    let post = row.facts.get("post").ok_or("no post")?;
                    let p = entities::post(post).map_err(|e| e.to_string())?;
                    Ok(n(p.ttl))
                })),
            )),
        },
        facts: vec![
            FactDecl {
                name: "follow".into(),
                key: template("u#${f}#following", "u#${a}"),
                via: Some(template("u#${a}#follower", "u#${f}")),
                via_ledger: None,
                valid: Arc::new(|i| entities::follow(i).map(|_| ()).map_err(|e| e.to_string())),
                reads: vec![],
                also: vec![],
            },
            FactDecl {
                name: "post".into(),
                key: template("u#${a}#post", "p#${p}"),
                via: None,
                via_ledger: None,
                valid: Arc::new(|i| entities::post(i).map(|_| ()).map_err(|e| e.to_string())),
                reads: vec!["createdAt"],
                also: vec![],
            },
        ],
        unless: vec![],
        when: vec![When::Distinct("f".into(), "a".into())],
        volatile: &[],
        page,
    }
}

/// The timeline entry of post `p` on `follower`'s timeline (every attribute;
/// what the join set writes, used by `verify`).
pub fn entry_item(follower: &str, p: &Post) -> Item {
    let mut item = keys::timeline_key(follower, &p.post_id, &p.author);
    item.insert(keys::TYPE.into(), s(keys::TYPE_TIMELINE));
    item.insert("postId".into(), s(&p.post_id));
    item.insert("authorId".into(), s(&p.author));
    item.insert("createdAt".into(), s(&p.created_at));
    item.insert(keys::TTL.into(), n(p.ttl));
    item
}

fn vars(pairs: &[(&str, &str)]) -> Vars {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The join set job of a stream rule's timeline job.
pub fn join_job(job: TimelineJob) -> JoinJob {
    match job {
        TimelineJob::Post {
            author_id,
            post_id,
            after,
        } => JoinJob {
            set: "timeline".into(),
            scope: "post".into(),
            bind: vars(&[("a", &author_id), ("p", &post_id)]),
            step: 0,
            after,
        },
        TimelineJob::Follow {
            follower_id,
            author_id,
        } => JoinJob {
            set: "timeline".into(),
            scope: "follow".into(),
            bind: vars(&[("f", &follower_id), ("a", &author_id)]),
            step: 0,
            after: None,
        },
    }
}

/// A body: a stream rule's [`TimelineJob`] (it has a `kind`) or a join set
/// page.
fn read_body(body: &str) -> Result<JoinJob, MessageError> {
    let has_kind = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| v.get("kind").is_some());
    if has_kind {
        Ok(join_job(decode(body)?))
    } else {
        JoinJob::decode(body)
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
            let job = read_body(body)?;
            plan_scope(&declaration(self.page), job, reads).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::joinset::{Scope, Step};
    use crate::engine::setjob::{Guard, Guarded};
    use crate::item::key_of;
    use crate::ledger::item_id;
    use crate::models::social::entities::tests::{follow_item, post_item, P1, T1};
    use chrono::{DateTime, Utc};
    use std::collections::HashMap;

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

    type Decision = (Option<Guarded>, Option<Guarded>);

    /// Decides the pair (f, a, P1) in `scope` with `items` as the table.
    fn decide_in(scope: &str, items: &[Item], now: DateTime<Utc>) -> Decision {
        let table: HashMap<String, Item> = items
            .iter()
            .map(|i| (item_id(&key_of(i, &["PK", "SK"])), i.clone()))
            .collect();
        let read = |k: &Item| table.get(&item_id(k)).cloned();
        declaration(10)
            .decide(
                scope,
                &vars(&[("f", "f"), ("a", "a"), ("p", P1)]),
                &read,
                now,
            )
            .expect("every key renders")
    }

    fn decide(items: &[Item], now: DateTime<Utc>) -> Decision {
        decide_in("post", items, now)
    }

    #[test]
    fn templates_are_the_model_keys() {
        let d = declaration(10);
        let v = vars(&[("f", "f"), ("a", "a"), ("p", P1)]);
        let names = [keys::PK, keys::SK];
        assert_eq!(
            d.target.key.key(&names, &v).unwrap(),
            keys::timeline_key("f", P1, "a")
        );
        assert_eq!(
            d.facts[0].key.key(&names, &v).unwrap(),
            keys::follow_key("f", "a")
        );
        assert_eq!(
            d.facts[0].via.as_ref().unwrap().key(&names, &v).unwrap(),
            keys::mirror_key("f", "a")
        );
        assert_eq!(
            d.facts[1].key.key(&names, &v).unwrap(),
            keys::post_key("a", P1)
        );
    }

    #[test]
    fn scopes_follow_from_the_templates() {
        let scopes = declaration(10).scopes().unwrap();
        assert_eq!(
            scopes,
            vec![
                Scope {
                    on: "follow".into(),
                    bound: ["a".to_string(), "f".to_string()].into(),
                    steps: vec![
                        Step::List {
                            fact: "post".into(),
                            via: false
                        },
                        Step::Sweep
                    ],
                },
                Scope {
                    on: "post".into(),
                    bound: ["a".to_string(), "p".to_string()].into(),
                    steps: vec![Step::List {
                        fact: "follow".into(),
                        via: true
                    }],
                },
            ]
        );
    }

    #[test]
    fn the_join_writes_exactly_the_entry_item() {
        let e = entry_item("f", &post());
        assert_eq!(e["PK"], s("u#f#timeline"));
        assert_eq!(e["SK"], s(format!("p#{P1}#u#a")));
        assert_eq!(e["type"], s("timeline"));
        assert_eq!(e["createdAt"], s(T1), "the post's, verbatim");
        assert_eq!(e["ttl"], n(TTL1));
        assert_eq!(e.len(), 7);
        let (d, x) = decide(&[follow_item("f", "a", T1), post_item("a", P1, T1)], now());
        let d = d.unwrap();
        assert_eq!(d.item, e);
        assert_eq!(
            d.guards,
            vec![
                Guard::exists(keys::follow_key("f", "a")),
                Guard::equals(keys::post_key("a", P1), "createdAt", s(T1)),
            ]
        );
        assert!(x.is_none());
    }

    #[test]
    fn entries_are_written_only_while_their_ttl_is_ahead() {
        let facts = [follow_item("f", "a", T1), post_item("a", P1, T1)];
        assert!(decide(&facts, at(TTL1)).0.is_none(), "ttl reached");
        assert!(decide(&facts, at(TTL1 - 1)).0.is_some());
        // An expired entry is DynamoDB's: neither kept nor deleted by us.
        let e = entry_item("f", &post());
        let (d, x) = decide(&[post_item("a", P1, T1), e], at(TTL1));
        assert!(d.is_none() && x.is_none());
    }

    #[test]
    fn deletes_are_guarded_by_the_fact_that_justifies_them() {
        let e = entry_item("f", &post());
        let only = |x: Decision| {
            assert!(x.0.is_none());
            x.1.unwrap().guards
        };
        // Unfollowed.
        assert_eq!(
            only(decide(&[post_item("a", P1, T1), e.clone()], now())),
            vec![Guard::absent(keys::follow_key("f", "a"))]
        );
        // Post deleted.
        assert_eq!(
            only(decide(&[follow_item("f", "a", T1), e.clone()], now())),
            vec![Guard::absent(keys::post_key("a", P1))]
        );
        // Both gone: the scope's own fact (shared by the chunk).
        assert_eq!(
            only(decide(std::slice::from_ref(&e), now())),
            vec![Guard::absent(keys::post_key("a", P1))]
        );
        assert_eq!(
            only(decide_in("follow", std::slice::from_ref(&e), now())),
            vec![Guard::absent(keys::follow_key("f", "a"))]
        );
        // Post re-dated into the past: the live entry goes while the post
        // keeps its new date (the follow's existence is not needed).
        let old = "2026-01-01T00:00:00Z";
        assert_eq!(
            only(decide(
                &[follow_item("f", "a", T1), post_item("a", P1, old), e],
                now()
            )),
            vec![Guard::equals(keys::post_key("a", P1), "createdAt", s(old))]
        );
    }

    #[test]
    fn bad_facts_keep_what_is_there() {
        let e = entry_item("f", &post());
        let (d, x) = decide(
            &[
                follow_item("f", "a", "bad"),
                post_item("a", P1, T1),
                e.clone(),
            ],
            now(),
        );
        assert_eq!(d, x, "kept as is: nothing to write");
        assert_eq!(d.unwrap().item, e);
        let (d, x) = decide(
            &[follow_item("f", "a", T1), post_item("a", P1, "later")],
            now(),
        );
        assert!(d.is_none() && x.is_none(), "nothing created from bad input");
    }

    #[test]
    fn never_on_ones_own_timeline() {
        let table = [post_item("a", P1, T1)];
        let read = |k: &Item| {
            table
                .iter()
                .find(|i| key_of(i, &["PK", "SK"]) == *k)
                .cloned()
        };
        let (d, _) = declaration(10)
            .decide(
                "post",
                &vars(&[("f", "a"), ("a", "a"), ("p", P1)]),
                &read,
                now(),
            )
            .unwrap();
        assert!(d.is_none());
    }

    #[test]
    fn stream_jobs_map_onto_scopes() {
        let j = join_job(TimelineJob::Post {
            author_id: "a".into(),
            post_id: P1.into(),
            after: Some("u#f9".into()),
        });
        assert_eq!(j.scope, "post");
        assert_eq!(j.bind, vars(&[("a", "a"), ("p", P1)]));
        assert_eq!(j.after.as_deref(), Some("u#f9"));
        let body = super::super::messages::encode(&TimelineJob::Follow {
            follower_id: "f".into(),
            author_id: "a".into(),
        });
        let j = read_body(&body).unwrap();
        assert_eq!((j.scope.as_str(), j.step), ("follow", 0));
        let page = JoinJob {
            step: 1,
            after: Some("p#x".into()),
            ..j
        };
        assert_eq!(read_body(&page.encode()).unwrap(), page);
        assert!(matches!(
            read_body(r#"{"version":1}"#),
            Err(MessageError::Permanent { .. })
        ));
    }
}
