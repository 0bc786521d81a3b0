//! The social network's writer facts, parsed and validated from items.
//!
//! Writer items are recognised by their key shape ([`keys::kind`]); their
//! attributes must agree with the key and have the types of §5.1. Anything
//! else is bad input: a structured [`InputError`] naming the key and the
//! reason, never the item.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::keys::{self, Kind};
use crate::error::InputError;
use crate::item::{display_key, key_of, AttrError, Item, ItemExt};

/// The item's key, for errors and logs.
pub fn key_display(item: &Item) -> String {
    display_key(&key_of(item, &[keys::PK, keys::SK]))
}

fn attr<'a>(entity: &'static str, item: &'a Item) -> impl Fn(AttrError) -> InputError + 'a {
    move |source| InputError::Attribute {
        entity,
        key: key_display(item),
        source,
    }
}

fn invalid(item: &Item, reason: impl Into<String>) -> InputError {
    InputError::Invalid {
        key: key_display(item),
        reason: reason.into(),
    }
}

/// An ISO-8601 UTC time: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
pub fn parse_time(raw: &str) -> Option<DateTime<Utc>> {
    let body = raw.strip_suffix('Z')?;
    if body.ends_with('.') {
        return None;
    }
    NaiveDateTime::parse_from_str(body, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc())
}

/// The ttl of a post created at `created`: floor(createdAt) + 7 days.
pub fn post_ttl(created: DateTime<Utc>) -> i64 {
    created.timestamp() + keys::POST_TTL_SECS
}

fn time(entity: &'static str, item: &Item, name: &str) -> Result<DateTime<Utc>, InputError> {
    let raw = item.s(name).map_err(attr(entity, item))?;
    parse_time(raw).ok_or_else(|| {
        attr(entity, item)(AttrError::Invalid {
            name: name.into(),
            reason: "not an ISO-8601 UTC time (YYYY-MM-DDTHH:MM:SS[.f]Z)".into(),
        })
    })
}

fn ulid(entity: &'static str, item: &Item, id: &str, name: &str) -> Result<(), InputError> {
    if keys::valid_ulid(id) {
        Ok(())
    } else {
        Err(attr(entity, item)(AttrError::Invalid {
            name: name.into(),
            reason: "post id is not a canonical ULID".into(),
        }))
    }
}

/// User info (`u#<id>`/`info`): the writer's profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub user: String,
    pub name: String,
}

/// "`follower` follows `followed`" (`u#<follower>#following`/`u#<followed>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follow {
    pub follower: String,
    pub followed: String,
    /// As written (copied verbatim onto the mirror).
    pub created_at: String,
}

/// A post (`u#<author>#post`/`p#<postId>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub author: String,
    pub post_id: String,
    /// As written (copied verbatim onto timeline entries).
    pub created_at: String,
    /// floor(createdAt) + 7 days, epoch seconds.
    pub ttl: i64,
}

/// A like (`p#<postId>#likelist`/`u#<userId>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Like {
    pub post_id: String,
    pub user: String,
    pub created_at: String,
}

/// An item of the table, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    UserInfo(UserInfo),
    Follow(Follow),
    Post(Post),
    Like(Like),
    /// A processor item (counts, follower mirror, like count, timeline
    /// entry): its content is the processors'.
    Processor(Kind),
}

/// The kind of an item by its key; an unknown shape is bad input.
pub fn kind_of(item: &Item) -> Result<Kind, InputError> {
    let e = attr("item", item);
    let pk = item.s(keys::PK).map_err(&e)?;
    let sk = item.s(keys::SK).map_err(&e)?;
    keys::kind(pk, sk).ok_or_else(|| InputError::UnknownEntity {
        key: key_display(item),
    })
}

/// Parses and validates a whole item (shared by every rule aspect).
pub fn parse(item: &Item) -> Result<Entity, InputError> {
    Ok(match kind_of(item)? {
        Kind::UserInfo { user } => {
            let name = item.s("name").map_err(attr("user", item))?.to_string();
            Entity::UserInfo(UserInfo { user, name })
        }
        Kind::Follow { follower, followed } => {
            if follower == followed {
                return Err(invalid(item, "a user cannot follow themselves"));
            }
            time("follow", item, "createdAt")?;
            let created_at = item.s("createdAt").map_err(attr("follow", item))?;
            Entity::Follow(Follow {
                follower,
                followed,
                created_at: created_at.to_string(),
            })
        }
        Kind::Post { author, post } => {
            let e = attr("post", item);
            ulid("post", item, &post, keys::SK)?;
            let post_id = item.s("postId").map_err(&e)?;
            if post_id != post {
                return Err(invalid(
                    item,
                    "postId does not match the key (expected SK=p#<postId>)",
                ));
            }
            item.s("body").map_err(&e)?;
            let created = time("post", item, "createdAt")?;
            Entity::Post(Post {
                author,
                post_id: post,
                created_at: item.s("createdAt").map_err(&e)?.to_string(),
                ttl: post_ttl(created),
            })
        }
        Kind::Like { post, user } => {
            ulid("like", item, &post, keys::PK)?;
            time("like", item, "createdAt")?;
            Entity::Like(Like {
                post_id: post,
                user,
                created_at: item.s("createdAt").map_err(attr("like", item))?.to_string(),
            })
        }
        other => Entity::Processor(other),
    })
}

/// The post in `item`, if it is a valid post.
pub fn post(item: &Item) -> Result<Post, InputError> {
    match parse(item)? {
        Entity::Post(p) => Ok(p),
        _ => Err(invalid(item, "not a post")),
    }
}

/// The follow in `item`, if it is a valid follow.
pub fn follow(item: &Item) -> Result<Follow, InputError> {
    match parse(item)? {
        Entity::Follow(f) => Ok(f),
        _ => Err(invalid(item, "not a follow")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::item::{n, s};
    use aws_sdk_dynamodb::types::AttributeValue;

    pub const P1: &str = "01HZY3M5X7Q8R9S0T1V2W3X4Y5";
    pub const T1: &str = "2026-03-01T10:00:00.250Z";

    pub fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    pub fn user_info(u: &str) -> Item {
        item(&[
            ("PK", s(format!("u#{u}"))),
            ("SK", s("info")),
            ("name", s(u)),
        ])
    }

    pub fn follow_item(a: &str, b: &str, at: &str) -> Item {
        let mut i = keys::follow_key(a, b);
        i.insert("createdAt".into(), s(at));
        i
    }

    pub fn post_item(author: &str, post: &str, at: &str) -> Item {
        let mut i = keys::post_key(author, post);
        i.insert("postId".into(), s(post));
        i.insert("createdAt".into(), s(at));
        i.insert("body".into(), s("hello"));
        i
    }

    pub fn like_item(post: &str, u: &str) -> Item {
        let mut i = keys::like_key(post, u);
        i.insert("createdAt".into(), s(T1));
        i
    }

    #[test]
    fn times_are_iso_utc_with_optional_fraction() {
        let t = parse_time("2026-03-01T10:00:00Z").unwrap();
        assert_eq!(t.timestamp(), 1_772_359_200);
        assert_eq!(parse_time(T1).unwrap().timestamp(), 1_772_359_200);
        assert!(parse_time("2026-03-01T10:00:00.123456789Z").is_some());
        for bad in [
            "2026-03-01T10:00:00",
            "2026-03-01T10:00:00+00:00",
            "2026-03-01 10:00:00Z",
            "2026-03-01T10:00:00.Z",
            "2026-02-30T10:00:00Z",
            "yesterday",
        ] {
            assert!(parse_time(bad).is_none(), "{bad}");
        }
        assert_eq!(
            post_ttl(parse_time(T1).unwrap()),
            1_772_359_200 + 604_800,
            "floor of the fraction"
        );
    }

    #[test]
    fn writer_facts_parse() {
        assert_eq!(
            parse(&user_info("ann")).unwrap(),
            Entity::UserInfo(UserInfo {
                user: "ann".into(),
                name: "ann".into()
            })
        );
        assert_eq!(
            follow(&follow_item("a", "b", T1)).unwrap(),
            Follow {
                follower: "a".into(),
                followed: "b".into(),
                created_at: T1.into()
            }
        );
        assert_eq!(
            post(&post_item("a", P1, T1)).unwrap(),
            Post {
                author: "a".into(),
                post_id: P1.into(),
                created_at: T1.into(),
                ttl: 1_772_359_200 + 604_800
            }
        );
        assert!(matches!(
            parse(&like_item(P1, "u")).unwrap(),
            Entity::Like(Like { .. })
        ));
        assert_eq!(
            parse(&keys::user_counts_key("a")).unwrap(),
            Entity::Processor(Kind::UserCounts { user: "a".into() })
        );
    }

    #[test]
    fn bad_input_says_what_and_where() {
        let self_follow = parse(&follow_item("a", "a", T1)).unwrap_err();
        assert_eq!(self_follow.kind(), "Invalid");
        assert!(self_follow.to_string().contains("PK=u#a#following"));
        assert_eq!(
            parse(&follow_item("a", "b", "soon")).unwrap_err().kind(),
            "InvalidValue"
        );
        let mut no_time = follow_item("a", "b", T1);
        no_time.remove("createdAt");
        assert_eq!(parse(&no_time).unwrap_err().kind(), "MissingAttribute");
        let mut typed = follow_item("a", "b", T1);
        typed.insert("createdAt".into(), n(5));
        assert_eq!(parse(&typed).unwrap_err().kind(), "WrongType");
        assert_eq!(
            parse(&post_item("a", "not-a-ulid", T1)).unwrap_err().kind(),
            "InvalidValue"
        );
        let mut other_id = post_item("a", P1, T1);
        other_id.insert("postId".into(), s("01HZY3M5X7Q8R9S0T1V2W3X4Y6"));
        assert_eq!(parse(&other_id).unwrap_err().kind(), "Invalid");
        let mut no_body = post_item("a", P1, T1);
        no_body.remove("body");
        assert_eq!(parse(&no_body).unwrap_err().kind(), "MissingAttribute");
        assert_eq!(
            parse(&like_item("nope", "u")).unwrap_err().kind(),
            "InvalidValue"
        );
        let unknown = item(&[("PK", s("u#a")), ("SK", s("settings"))]);
        assert_eq!(parse(&unknown).unwrap_err().kind(), "UnknownEntity");
        let no_sk = item(&[("PK", s("u#a"))]);
        assert_eq!(parse(&no_sk).unwrap_err().kind(), "MissingAttribute");
        let mut nameless = user_info("a");
        nameless.remove("name");
        assert_eq!(parse(&nameless).unwrap_err().kind(), "MissingAttribute");
        // Never the item: the body of a post is not in the message.
        let mut secret = post_item("a", P1, "never");
        secret.insert("body".into(), s("SECRET"));
        assert!(!parse(&secret).unwrap_err().to_string().contains("SECRET"));
    }
}
