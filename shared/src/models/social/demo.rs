//! `jobstream demo --model social`: a small network (one user with many
//! followers) follows, posts, likes, unfollows and deletes; the processors
//! drain; the seed's seven access patterns are printed as tables and
//! compared with what the facts imply.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};

use super::keys;
use crate::engine::setjob::BoxFut;
use crate::item::{s, Item, ItemExt};
use crate::models::{BoxError, Harness};
use crate::report::render_table;
use crate::store::Store;

/// Followers of the demo's celebrity.
pub const FANS: usize = 150;
/// Likes on the celebrity's post in one burst.
pub const BURST: usize = 300;

/// The writer facts of a scenario, as they should be once it is played.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    pub users: BTreeMap<String, String>,
    /// (follower, followed) -> createdAt
    pub follows: BTreeMap<(String, String), String>,
    /// (author, post id) -> createdAt
    pub posts: BTreeMap<(String, String), String>,
    /// (post id, user)
    pub likes: BTreeSet<(String, String)>,
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A post id for a post created at `t` (the `n`-th of the scenario).
pub fn post_id(t: DateTime<Utc>, n: u128) -> String {
    keys::ulid(t.timestamp_millis().max(0) as u64, n)
}

pub fn user_item(id: &str, name: &str) -> Item {
    let mut i = keys::user_info_key(id);
    i.insert("name".into(), s(name));
    i
}

pub fn follow_item(follower: &str, followed: &str, at: &str) -> Item {
    let mut i = keys::follow_key(follower, followed);
    i.insert("createdAt".into(), s(at));
    i
}

pub fn post_item(author: &str, post_id: &str, at: &str, body: &str) -> Item {
    let mut i = keys::post_key(author, post_id);
    i.insert("postId".into(), s(post_id));
    i.insert("createdAt".into(), s(at));
    i.insert("body".into(), s(body));
    i
}

pub fn like_item(post_id: &str, user: &str, at: &str) -> Item {
    let mut i = keys::like_key(post_id, user);
    i.insert("createdAt".into(), s(at));
    i
}

fn fan(i: usize) -> String {
    format!("fan{i:03}")
}

/// What the demo writes, in two rounds (the second unfollows, deletes,
/// follows anew and likes in a burst).
pub struct Scenario {
    pub round1: Vec<Item>,
    pub round2_puts: Vec<Item>,
    pub round2_deletes: Vec<Item>,
    /// Bad input written on purpose (self-follow, a post without a ULID).
    pub bad: Vec<Item>,
    pub facts: Facts,
}

/// The scenario, timed relative to `now`.
pub fn scenario(now: DateTime<Utc>) -> Scenario {
    let at = |mins: i64| iso(now - Duration::minutes(mins));
    let mut f = Facts::default();
    let mut round1 = Vec::new();
    for (id, name) in [
        ("ann", "Ann"),
        ("bob", "Bob"),
        ("cid", "Cid"),
        ("dee", "Dee"),
        ("star", "Star"),
    ] {
        round1.push(user_item(id, name));
        f.users.insert(id.into(), name.into());
    }
    let mut follow = |round: &mut Vec<Item>, a: &str, b: &str, t: String| {
        round.push(follow_item(a, b, &t));
        f.follows.insert((a.into(), b.into()), t);
    };
    for (a, b) in [
        ("ann", "bob"),
        ("ann", "star"),
        ("bob", "ann"),
        ("bob", "star"),
        ("cid", "ann"),
        ("cid", "bob"),
        ("dee", "star"),
    ] {
        follow(&mut round1, a, b, at(300));
    }
    for i in 0..FANS {
        follow(&mut round1, &fan(i), "star", at(290));
    }
    let mut n = 0u128;
    let mut post = |round: &mut Vec<Item>, author: &str, mins: i64, body: &str| -> String {
        let t = now - Duration::minutes(mins);
        n += 1;
        let id = post_id(t, n);
        round.push(post_item(author, &id, &iso(t), body));
        f.posts.insert((author.into(), id.clone()), iso(t));
        id
    };
    let ann1 = post(&mut round1, "ann", 240, "first light");
    let _ann2 = post(&mut round1, "ann", 120, "coffee");
    // Ten days old: past its ttl, on no timeline.
    let _bob_old = post(&mut round1, "bob", 10 * 24 * 60, "an old one");
    let bob1 = post(&mut round1, "bob", 90, "rust 2024");
    let star1 = post(&mut round1, "star", 60, "hello fans");
    let star2 = post(&mut round1, "star", 30, "deleted soon");
    let mut round2_puts = Vec::new();
    let mut round2_deletes = Vec::new();
    // cid unfollows bob; star deletes a post; dee follows ann (pulls her
    // recent posts); a burst of likes on star's post.
    round2_deletes.push(keys::follow_key("cid", "bob"));
    f.follows.remove(&("cid".to_string(), "bob".to_string()));
    round2_deletes.push(keys::post_key("star", &star2));
    f.posts.remove(&("star".to_string(), star2.clone()));
    round2_puts.push(follow_item("dee", "ann", &at(10)));
    f.follows.insert(("dee".into(), "ann".into()), at(10));
    for i in 0..BURST.min(FANS) {
        round2_puts.push(like_item(&star1, &fan(i), &at(5)));
        f.likes.insert((star1.clone(), fan(i)));
    }
    for (p, u) in [
        (&ann1, "bob"),
        (&ann1, "cid"),
        (&bob1, "ann"),
        (&star1, "ann"),
    ] {
        round2_puts.push(like_item(p, u, &at(4)));
        f.likes.insert((p.clone(), u.into()));
    }
    // A post to be deleted that was liked: its likes and count stay.
    round2_puts.push(like_item(&star2, "ann", &at(3)));
    f.likes.insert((star2.clone(), "ann".into()));
    let bad = vec![
        follow_item("dee", "dee", &at(2)),
        post_item("dee", "not-a-ulid", &at(2), "bad id"),
    ];
    Scenario {
        round1,
        round2_puts,
        round2_deletes,
        bad,
        facts: f,
    }
}

/// What the seven access patterns should return, derived from the facts
/// independently of the rules.
#[derive(Debug, Default, PartialEq)]
pub struct Views {
    /// user -> (followers, following, posts); users without any count have
    /// no counts item.
    pub counts: BTreeMap<String, (i64, i64, i64)>,
    pub followers: BTreeMap<String, Vec<(String, String)>>,
    pub following: BTreeMap<String, Vec<String>>,
    pub posts: BTreeMap<String, Vec<String>>,
    pub likes: BTreeMap<String, Vec<String>>,
    pub like_counts: BTreeMap<String, i64>,
    /// user -> [(post id, author, createdAt, ttl)]
    pub timelines: BTreeMap<String, Vec<(String, String, String, i64)>>,
}

/// The views the facts imply at `now`.
pub fn expected(f: &Facts, now: DateTime<Utc>) -> Views {
    let mut v = Views::default();
    let mut counts: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    for ((a, b), t) in &f.follows {
        counts.entry(a.clone()).or_default().1 += 1;
        counts.entry(b.clone()).or_default().0 += 1;
        v.followers
            .entry(b.clone())
            .or_default()
            .push((a.clone(), t.clone()));
        v.following.entry(a.clone()).or_default().push(b.clone());
    }
    for (a, p) in f.posts.keys() {
        counts.entry(a.clone()).or_default().2 += 1;
        v.posts.entry(a.clone()).or_default().push(p.clone());
    }
    for (p, u) in &f.likes {
        v.likes.entry(p.clone()).or_default().push(u.clone());
        *v.like_counts.entry(p.clone()).or_default() += 1;
    }
    v.counts = counts;
    for ((a, p), t) in &f.posts {
        let Some(created) = super::entities::parse_time(t) else {
            continue;
        };
        let ttl = created.timestamp() + keys::POST_TTL_SECS;
        if ttl <= now.timestamp() {
            continue;
        }
        for (follower, followed) in f.follows.keys() {
            if followed == a && follower != a {
                v.timelines.entry(follower.clone()).or_default().push((
                    p.clone(),
                    a.clone(),
                    t.clone(),
                    ttl,
                ));
            }
        }
    }
    for list in v.timelines.values_mut() {
        list.sort();
    }
    v
}

fn str_of(i: &Item, a: &str) -> String {
    i.s(a).unwrap_or("-").to_string()
}

fn num_of(i: &Item, a: &str) -> i64 {
    i.opt_i64(a).ok().flatten().unwrap_or(-1)
}

fn strip(sk: &str, prefix: &str) -> String {
    sk.strip_prefix(prefix).unwrap_or(sk).to_string()
}

/// Reads the seven access patterns for every user and post of the facts.
pub async fn observe(store: &Store, table: &str, f: &Facts) -> Result<Views, BoxError> {
    let q = |pk: String| async move { store.query(table, None, keys::PK, &pk, None).await };
    let mut v = Views::default();
    let mut users: BTreeSet<String> = f.users.keys().cloned().collect();
    users.extend(f.follows.keys().flat_map(|(a, b)| [a.clone(), b.clone()]));
    for u in &users {
        for i in q(keys::user(u)).await? {
            if i.s(keys::SK).ok() == Some(keys::COUNT_SK) {
                v.counts.insert(
                    u.clone(),
                    (
                        num_of(&i, keys::FOLLOWERS),
                        num_of(&i, keys::FOLLOWING),
                        num_of(&i, keys::POSTS),
                    ),
                );
            }
        }
        let followers: Vec<(String, String)> = q(keys::follower_pk(u))
            .await?
            .iter()
            .map(|i| (strip(&str_of(i, keys::SK), "u#"), str_of(i, "createdAt")))
            .collect();
        if !followers.is_empty() {
            v.followers.insert(u.clone(), followers);
        }
        let following: Vec<String> = q(keys::following_pk(u))
            .await?
            .iter()
            .filter(|i| super::entities::parse(i).is_ok())
            .map(|i| strip(&str_of(i, keys::SK), "u#"))
            .collect();
        if !following.is_empty() {
            v.following.insert(u.clone(), following);
        }
        let posts: Vec<String> = q(keys::post_pk(u))
            .await?
            .iter()
            .filter(|i| super::entities::parse(i).is_ok())
            .map(|i| strip(&str_of(i, keys::SK), "p#"))
            .collect();
        if !posts.is_empty() {
            v.posts.insert(u.clone(), posts);
        }
        let mut timeline: Vec<(String, String, String, i64)> = q(keys::timeline_pk(u))
            .await?
            .iter()
            .map(|i| {
                (
                    str_of(i, "postId"),
                    str_of(i, "authorId"),
                    str_of(i, "createdAt"),
                    num_of(i, keys::TTL),
                )
            })
            .collect();
        timeline.sort();
        if !timeline.is_empty() {
            v.timelines.insert(u.clone(), timeline);
        }
    }
    let mut posts: BTreeSet<String> = f.posts.keys().map(|(_, p)| p.clone()).collect();
    posts.extend(f.likes.iter().map(|(p, _)| p.clone()));
    for p in &posts {
        let likes: Vec<String> = q(keys::likelist_pk(p))
            .await?
            .iter()
            .map(|i| strip(&str_of(i, keys::SK), "u#"))
            .collect();
        if !likes.is_empty() {
            v.likes.insert(p.clone(), likes);
        }
        if let Some(i) = store.get(table, keys::likecount_key(p)).await? {
            v.like_counts.insert(p.clone(), num_of(&i, keys::LIKES));
        }
    }
    Ok(v)
}

/// The differences between two views, one line each.
pub fn differences(want: &Views, got: &Views) -> Vec<String> {
    fn diff<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
        what: &str,
        want: &BTreeMap<K, V>,
        got: &BTreeMap<K, V>,
        out: &mut Vec<String>,
    ) {
        let ks: BTreeSet<&K> = want.keys().chain(got.keys()).collect();
        for k in ks {
            if want.get(k) != got.get(k) {
                out.push(format!(
                    "{what} of {k:?}: expected {:?}, found {:?}",
                    want.get(k),
                    got.get(k)
                ));
            }
        }
    }
    let mut out = Vec::new();
    diff("counts", &want.counts, &got.counts, &mut out);
    diff("followers", &want.followers, &got.followers, &mut out);
    diff("following", &want.following, &got.following, &mut out);
    diff("posts", &want.posts, &got.posts, &mut out);
    diff("likes", &want.likes, &got.likes, &mut out);
    diff("like count", &want.like_counts, &got.like_counts, &mut out);
    diff("timeline", &want.timelines, &got.timelines, &mut out);
    out
}

const SHOWN: usize = 8;

fn shown<T>(rows: Vec<T>) -> (Vec<T>, usize) {
    let more = rows.len().saturating_sub(SHOWN);
    (rows.into_iter().take(SHOWN).collect(), more)
}

fn print(title: &str, headers: &[&str], rows: Vec<Vec<String>>) {
    let (rows, more) = shown(rows);
    println!("\n{title}\n{}", render_table(headers, &rows));
    if more > 0 {
        println!("... and {more} more");
    }
}

/// Prints the seven access patterns for the demo's main characters.
pub fn print_views(v: &Views, users: &[&str], posts: &[(&str, &str)]) {
    for u in users {
        let c = v.counts.get(*u).copied();
        print(
            &format!("getUserInfoByUserID({u}): Query PK=u#{u}"),
            &["SK", "type", "followers", "following", "posts"],
            vec![
                vec!["info".into(), "-".into(), "".into(), "".into(), "".into()],
                match c {
                    Some((a, b, p)) => vec![
                        "count".into(),
                        "counts".into(),
                        a.to_string(),
                        b.to_string(),
                        p.to_string(),
                    ],
                    None => vec!["(no count item)".into()],
                },
            ],
        );
        print(
            &format!("getFollowerListByUserID({u}): Query PK=u#{u}#follower"),
            &["follower", "createdAt"],
            v.followers
                .get(*u)
                .into_iter()
                .flatten()
                .map(|(f, t)| vec![f.clone(), t.clone()])
                .collect(),
        );
        print(
            &format!("getFollowingListByUserID({u}): Query PK=u#{u}#following"),
            &["following"],
            v.following
                .get(*u)
                .into_iter()
                .flatten()
                .map(|f| vec![f.clone()])
                .collect(),
        );
        print(
            &format!("getPostListByUserID({u}): Query PK=u#{u}#post"),
            &["postId"],
            v.posts
                .get(*u)
                .into_iter()
                .flatten()
                .map(|p| vec![p.clone()])
                .collect(),
        );
        print(
            &format!("getTimelineByUserID({u}): Query PK=u#{u}#timeline"),
            &["postId", "authorId", "createdAt", "ttl"],
            v.timelines
                .get(*u)
                .into_iter()
                .flatten()
                .map(|(p, a, t, ttl)| vec![p.clone(), a.clone(), t.clone(), ttl.to_string()])
                .collect(),
        );
    }
    for (label, p) in posts {
        print(
            &format!("getUserLikesByPostID({label}): Query PK=p#{p}#likelist"),
            &["user"],
            v.likes
                .get(*p)
                .into_iter()
                .flatten()
                .map(|u| vec![u.clone()])
                .collect(),
        );
        print(
            &format!("getLikeCountByPostID({label}): GetItem PK=p#{p}#likecount, SK=count"),
            &["likes"],
            vec![vec![v
                .like_counts
                .get(*p)
                .map_or("(no item)".to_string(), i64::to_string)]],
        );
    }
}

async fn write(
    store: &Store,
    table: &str,
    puts: Vec<Item>,
    deletes: Vec<Item>,
) -> Result<(), BoxError> {
    if !puts.is_empty() {
        store.put_items(table, puts).await?;
    }
    if !deletes.is_empty() {
        store.delete_keys(table, deletes).await?;
    }
    Ok(())
}

async fn play(h: &mut dyn Harness) -> Result<Vec<String>, BoxError> {
    let now = Utc::now();
    let sc = scenario(now);
    let store = Store::new(h.dynamodb().clone());
    let table = h.table().to_string();
    println!(
        "social demo: 5 users, {FANS} fans of `star`, {} posts, {} likes (a burst of {} on one post)",
        sc.facts.posts.len() + 1,
        sc.facts.likes.len(),
        BURST.min(FANS)
    );
    write(&store, &table, sc.round1.clone(), vec![]).await?;
    write(&store, &table, sc.bad.clone(), vec![]).await?;
    let n1 = h.drain().await?;
    write(
        &store,
        &table,
        sc.round2_puts.clone(),
        sc.round2_deletes.clone(),
    )
    .await?;
    let n2 = h.drain().await?;
    println!(
        "processed {n1} + {n2} records and jobs; processor item writes: {}",
        h.processor_writes()
    );
    let got = observe(&store, &table, &sc.facts).await?;
    let want = expected(&sc.facts, Utc::now());
    let star_posts: Vec<&String> = sc
        .facts
        .posts
        .keys()
        .filter(|(a, _)| a == "star")
        .map(|(_, p)| p)
        .collect();
    let ann_posts: Vec<&String> = sc
        .facts
        .posts
        .keys()
        .filter(|(a, _)| a == "ann")
        .map(|(_, p)| p)
        .collect();
    let mut shown_posts = Vec::new();
    if let Some(p) = star_posts.first() {
        shown_posts.push(("star's post", p.as_str()));
    }
    if let Some(p) = ann_posts.first() {
        shown_posts.push(("ann's first post", p.as_str()));
    }
    print_views(&got, &["ann", "star", "dee"], &shown_posts);
    let mut diffs = differences(&want, &got);
    let problems = h.verify().await?;
    diffs.extend(problems.into_iter().map(|p| format!("verify: {p}")));
    let dead = h.dead_letters().await?;
    diffs.extend(dead.into_iter().map(|d| format!("dead letters: {d}")));
    if diffs.is_empty() {
        println!(
            "\nevery access pattern returns what the facts imply; verify finds nothing; no dead letters"
        );
    } else {
        for d in &diffs {
            println!("DIFFERENCE: {d}");
        }
    }
    Ok(diffs)
}

/// The demo entry point ([`crate::models::Demo`]).
pub fn run(h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(play(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_implies_what_the_seed_shows() {
        let now = DateTime::from_timestamp(1_772_400_000, 0).unwrap();
        let sc = scenario(now);
        let v = expected(&sc.facts, now);
        // star: FANS + ann, bob, dee follow; two posts, one deleted.
        assert_eq!(v.counts["star"], ((FANS + 3) as i64, 0, 1));
        // ann: followed by bob, cid, dee (new); follows bob and star.
        assert_eq!(v.counts["ann"], (3, 2, 2));
        // cid unfollowed bob: follows ann only; bob's followers: ann.
        assert_eq!(v.counts["cid"], (0, 1, 0));
        assert_eq!(v.counts["bob"], (1, 2, 2));
        assert_eq!(v.counts.len(), 5 + FANS);
        // Timelines: dee's new follow pulls ann's two posts; bob's old post
        // is on nobody's; star's deleted post is on nobody's.
        let dee: Vec<&str> = v.timelines["dee"].iter().map(|e| e.1.as_str()).collect();
        assert_eq!(dee.iter().filter(|a| **a == "ann").count(), 2);
        assert_eq!(dee.iter().filter(|a| **a == "star").count(), 1);
        assert_eq!(v.timelines["ann"].len(), 1 + 1, "bob's recent + star's");
        assert_eq!(v.timelines[&fan(0)].len(), 1);
        let star1 = v.posts["star"][0].clone();
        assert_eq!(v.like_counts[&star1], BURST.min(FANS) as i64 + 1);
        // Liked, then deleted: likes stay.
        assert_eq!(v.like_counts.len(), 4);
        // Every item is valid but the bad ones.
        for i in sc.round1.iter().chain(&sc.round2_puts) {
            assert!(super::super::entities::parse(i).is_ok(), "{i:?}");
        }
        for i in &sc.bad {
            assert!(super::super::entities::parse(i).is_err());
        }
    }

    #[test]
    fn differences_name_the_view_and_the_key() {
        let mut a = Views::default();
        a.like_counts.insert("p".into(), 3);
        let mut b = Views::default();
        b.like_counts.insert("p".into(), 2);
        assert_eq!(
            differences(&a, &b),
            vec![r#"like count of "p": expected Some(3), found Some(2)"#.to_string()]
        );
        assert!(differences(&a, &a).is_empty());
    }
}
