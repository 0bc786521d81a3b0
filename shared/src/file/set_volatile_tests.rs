//! A set's `volatile:` attributes: an existing item equal but for them is
//! kept (a generation time, a TTL from `now` are not rewritten on every
//! rescoring), and check-model names an unknown one.

use super::compile;
use super::test_support::model;
use crate::engine::setjob::SetJob;

const SOCIAL: &str = include_str!("../../../models/social.yaml");

fn with_volatile(list: &str) -> String {
    let ttl = "    ttl: \"epoch(post.createdAt) + 604800\"\n";
    assert!(SOCIAL.contains(ttl));
    SOCIAL.replace(ttl, &format!("{ttl}    volatile: {list}\n"))
}

#[test]
fn volatile_attributes_reach_the_set_job() {
    let m = model(&with_volatile("[ttl, createdAt]"));
    let set: &'static _ = &m.sets[0];
    let job = set.declaration(m);
    assert_eq!(SetJob::volatile(&job), ["ttl", "createdAt"]);
    // None said: none.
    let m = model(SOCIAL);
    let job = m.sets[0].declaration(m);
    assert!(SetJob::volatile(&job).is_empty());
}

#[test]
fn an_unknown_volatile_attribute_is_named_at_its_place() {
    let text = with_volatile("[ttl, createdat]");
    let p = compile(&text, "t").unwrap_err();
    let (i, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("volatile:"))
        .expect("line");
    let col = line.find("createdat").expect("col") as u64 + 1;
    assert!(
        p.iter().any(|p| p.line == i as u64 + 1
            && p.col == col
            && p.message
                == "set `timeline`: volatile `createdat` is not an attribute of `timeline` nor the table's ttl (did you mean `createdAt`?)"),
        "{p:#?}"
    );
    assert_eq!(p.len(), 1, "{p:#?}");
}
