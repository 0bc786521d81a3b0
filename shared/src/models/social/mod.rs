//! Model C: the social network of seed 002 (SPEC §5.1).
//!
//! - [`keys`] - every key format of the model.
//! - [`entities`] - the writer facts (user info, follow, post, like), validated.
//! - [`rules`] - follower mirrors, user counts, coalesced like counts, and
//!   the timeline jobs a change starts.
//! - [`messages`] - the timeline job bodies.
//! - [`timeline`] - timelines as a set job (paged fan-out, guarded writes).
//! - [`checks`] - `verify` for timelines.
//! - [`demo`] - the `jobstream demo --model social` scenario.

pub mod checks;
pub mod demo;
pub mod entities;
pub mod keys;
pub mod messages;
pub mod rules;
pub mod timeline;

use std::sync::Arc;

use crate::models::table::{QueueDef, TableDef};
use crate::models::{Consumer, Job, Model};

/// The social network in the registry.
pub fn model() -> Model {
    Model {
        name: "social",
        about:
            "social network (seed 002): follower mirrors, counts, coalesced likes, timeline fan-out",
        table: table(),
        rules: Arc::new(rules::SocialRules),
        fold: None,
        consumers: vec![Consumer {
            queue: QueueDef::standard(
                rules::TIMELINE_QUEUE,
                "jobstream-timeline-jobs",
                "jobstream-timeline-jobs-dlq",
                "timeline",
            ),
            job: Job::Set(Arc::new(timeline::Timeline::default())),
        }],
        // Every record: writer and processor items share sort key shapes
        // (`u#<id>`: follows and mirrors; `p#<postId>...`: posts and
        // timeline entries), so mirrors and entries (their TTL expiry
        // included) are skipped by `ignores`, unread, not by the filter.
        derive_filter: vec![],
        checks: Some(checks::check),
        demo: Some(demo::run),
    }
}

/// The social network's table (seed 002).
pub fn table() -> TableDef {
    TableDef {
        name: "social-network",
        pk: keys::PK,
        sk: keys::SK,
        gsis: vec![],
        ttl_attribute: Some(keys::TTL),
        stream: true,
    }
}
