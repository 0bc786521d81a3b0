//! Every key format of the social network (seed 002, SPEC §5.1), in one
//! place: writers, rules, the timeline job, checks and the demo all build
//! and read keys through these functions.

use crate::item::{s, Item};

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const TTL: &str = "ttl";
/// Entity type attribute of processor items.
pub const TYPE: &str = "type";

pub const TYPE_COUNTS: &str = "counts";
pub const TYPE_FOLLOWER: &str = "follower";
pub const TYPE_LIKECOUNT: &str = "likecount";
pub const TYPE_TIMELINE: &str = "timeline";

pub const INFO_SK: &str = "info";
pub const COUNT_SK: &str = "count";

/// Counter attributes of the user counts item and the like count item.
pub const FOLLOWERS: &str = "followers";
pub const FOLLOWING: &str = "following";
pub const POSTS: &str = "posts";
pub const LIKES: &str = "likes";

/// A post's (and its timeline entries') lifetime: ttl = floor(createdAt) + this.
pub const POST_TTL_SECS: i64 = 604_800;

const FOLLOWING_SUFFIX: &str = "#following";
const FOLLOWER_SUFFIX: &str = "#follower";
const POST_SUFFIX: &str = "#post";
const TIMELINE_SUFFIX: &str = "#timeline";
const LIKELIST_SUFFIX: &str = "#likelist";
const LIKECOUNT_SUFFIX: &str = "#likecount";

/// `u#<userId>`: user info and counts (PK), the other user of a follow,
/// follower or like (SK).
pub fn user(user_id: &str) -> String {
    format!("u#{user_id}")
}

/// `u#<A>#following`: whom A follows.
pub fn following_pk(user_id: &str) -> String {
    format!("u#{user_id}{FOLLOWING_SUFFIX}")
}

/// `u#<B>#follower`: who follows B (processor mirrors).
pub fn follower_pk(user_id: &str) -> String {
    format!("u#{user_id}{FOLLOWER_SUFFIX}")
}

/// `u#<userId>#post`: a user's posts.
pub fn post_pk(user_id: &str) -> String {
    format!("u#{user_id}{POST_SUFFIX}")
}

/// `p#<postId>`: a post's sort key.
pub fn post_sk(post_id: &str) -> String {
    format!("p#{post_id}")
}

/// `p#<postId>#likelist`: who liked a post.
pub fn likelist_pk(post_id: &str) -> String {
    format!("p#{post_id}{LIKELIST_SUFFIX}")
}

/// `p#<postId>#likecount`: a post's like count (SK `count`).
pub fn likecount_pk(post_id: &str) -> String {
    format!("p#{post_id}{LIKECOUNT_SUFFIX}")
}

/// `u#<followerId>#timeline`: a user's timeline.
pub fn timeline_pk(user_id: &str) -> String {
    format!("u#{user_id}{TIMELINE_SUFFIX}")
}

/// `p#<postId>#u#<authorId>`: a timeline entry's sort key.
pub fn timeline_sk(post_id: &str, author_id: &str) -> String {
    format!("p#{post_id}#u#{author_id}")
}

/// A `PK`/`SK` key item.
pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    [(PK.to_string(), s(pk)), (SK.to_string(), s(sk))].into()
}

pub fn user_info_key(user_id: &str) -> Item {
    key(user(user_id), INFO_SK)
}

pub fn user_counts_key(user_id: &str) -> Item {
    key(user(user_id), COUNT_SK)
}

/// The follow item of "`follower` follows `followed`".
pub fn follow_key(follower: &str, followed: &str) -> Item {
    key(following_pk(follower), user(followed))
}

/// The follower mirror of "`follower` follows `followed`".
pub fn mirror_key(follower: &str, followed: &str) -> Item {
    key(follower_pk(followed), user(follower))
}

pub fn post_key(author_id: &str, post_id: &str) -> Item {
    key(post_pk(author_id), post_sk(post_id))
}

pub fn like_key(post_id: &str, user_id: &str) -> Item {
    key(likelist_pk(post_id), user(user_id))
}

pub fn likecount_key(post_id: &str) -> Item {
    key(likecount_pk(post_id), COUNT_SK)
}

pub fn timeline_key(follower: &str, post_id: &str, author_id: &str) -> Item {
    key(timeline_pk(follower), timeline_sk(post_id, author_id))
}

/// What an item is, by its key shape (ids as written in the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    UserInfo {
        user: String,
    },
    UserCounts {
        user: String,
    },
    /// `follower` follows `followed`.
    Follow {
        follower: String,
        followed: String,
    },
    /// Mirror of "`follower` follows `followed`".
    Follower {
        follower: String,
        followed: String,
    },
    Post {
        author: String,
        post: String,
    },
    Like {
        post: String,
        user: String,
    },
    LikeCount {
        post: String,
    },
    Timeline {
        follower: String,
        post: String,
        author: String,
    },
}

/// A user id: non-empty, no `#` (keys would be ambiguous), no whitespace.
pub fn valid_user_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && !id.contains('#') && !id.chars().any(char::is_whitespace)
}

/// A ULID in its canonical form: 26 Crockford base-32 characters (upper
/// case), the first at most `7` (48-bit time).
pub fn valid_ulid(id: &str) -> bool {
    const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    id.len() == 26
        && id.chars().all(|c| ALPHABET.contains(c))
        && id.as_bytes().first().is_some_and(|b| *b <= b'7')
}

/// Encodes a ULID from its 48-bit millisecond time and 80 random bits.
pub fn ulid(ms: u64, random: u128) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let value: u128 = (u128::from(ms & 0xFFFF_FFFF_FFFF) << 80) | (random & ((1u128 << 80) - 1));
    (0..26)
        .map(|i| {
            let shift = 125 - 5 * i;
            ALPHABET[((value >> shift) & 0x1F) as usize] as char
        })
        .collect()
}

fn user_part(raw: &str) -> Option<String> {
    let id = raw.strip_prefix("u#")?;
    valid_user_id(id).then(|| id.to_string())
}

fn middle<'a>(raw: &'a str, prefix: &str, suffix: &str) -> Option<&'a str> {
    raw.strip_prefix(prefix)?.strip_suffix(suffix)
}

/// Classifies a key. `None`: no item of §5.1 has this shape. Ids are checked
/// for shape only as far as the key needs (user ids without `#`); post ids
/// are validated as ULIDs by the entity parsers.
pub fn kind(pk: &str, sk: &str) -> Option<Kind> {
    if let Some(rest) = pk.strip_prefix("p#") {
        if let Some(post) = rest.strip_suffix(LIKELIST_SUFFIX) {
            let user = user_part(sk)?;
            return (!post.is_empty() && !post.contains('#')).then(|| Kind::Like {
                post: post.to_string(),
                user,
            });
        }
        if let Some(post) = rest.strip_suffix(LIKECOUNT_SUFFIX) {
            return (sk == COUNT_SK && !post.is_empty() && !post.contains('#')).then(|| {
                Kind::LikeCount {
                    post: post.to_string(),
                }
            });
        }
        return None;
    }
    if let Some(user) = user_part(pk) {
        return match sk {
            INFO_SK => Some(Kind::UserInfo { user }),
            COUNT_SK => Some(Kind::UserCounts { user }),
            _ => None,
        };
    }
    if let Some(a) = middle(pk, "u#", FOLLOWING_SUFFIX).filter(|a| valid_user_id(a)) {
        return Some(Kind::Follow {
            follower: a.to_string(),
            followed: user_part(sk)?,
        });
    }
    if let Some(b) = middle(pk, "u#", FOLLOWER_SUFFIX).filter(|b| valid_user_id(b)) {
        return Some(Kind::Follower {
            follower: user_part(sk)?,
            followed: b.to_string(),
        });
    }
    if let Some(u) = middle(pk, "u#", POST_SUFFIX).filter(|u| valid_user_id(u)) {
        let post = sk.strip_prefix("p#")?;
        return (!post.is_empty() && !post.contains('#')).then(|| Kind::Post {
            author: u.to_string(),
            post: post.to_string(),
        });
    }
    if let Some(f) = middle(pk, "u#", TIMELINE_SUFFIX).filter(|f| valid_user_id(f)) {
        let rest = sk.strip_prefix("p#")?;
        let (post, author) = rest.split_once("#u#")?;
        return (!post.is_empty() && !post.contains('#') && valid_user_id(author)).then(|| {
            Kind::Timeline {
                follower: f.to_string(),
                post: post.to_string(),
                author: author.to_string(),
            }
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "01HZY3M5X7Q8R9S0T1V2W3X4Y5";

    #[test]
    fn key_formats_of_the_seed() {
        assert_eq!(user("alice"), "u#alice");
        assert_eq!(following_pk("a"), "u#a#following");
        assert_eq!(follower_pk("b"), "u#b#follower");
        assert_eq!(post_pk("a"), "u#a#post");
        assert_eq!(post_sk(P), format!("p#{P}"));
        assert_eq!(likelist_pk(P), format!("p#{P}#likelist"));
        assert_eq!(likecount_pk(P), format!("p#{P}#likecount"));
        assert_eq!(timeline_pk("f"), "u#f#timeline");
        assert_eq!(timeline_sk(P, "a"), format!("p#{P}#u#a"));
        assert_eq!(follow_key("a", "b"), key("u#a#following", "u#b"));
        assert_eq!(mirror_key("a", "b"), key("u#b#follower", "u#a"));
        assert_eq!(user_counts_key("a"), key("u#a", "count"));
        assert_eq!(likecount_key(P), key(format!("p#{P}#likecount"), "count"));
    }

    #[test]
    fn every_key_function_round_trips_through_kind() {
        let k = |item: Item| {
            let pk = item[PK].as_s().unwrap().clone();
            let sk = item[SK].as_s().unwrap().clone();
            kind(&pk, &sk)
        };
        assert_eq!(
            k(user_info_key("a")),
            Some(Kind::UserInfo { user: "a".into() })
        );
        assert_eq!(
            k(user_counts_key("a")),
            Some(Kind::UserCounts { user: "a".into() })
        );
        assert_eq!(
            k(follow_key("a", "b")),
            Some(Kind::Follow {
                follower: "a".into(),
                followed: "b".into()
            })
        );
        assert_eq!(
            k(mirror_key("a", "b")),
            Some(Kind::Follower {
                follower: "a".into(),
                followed: "b".into()
            })
        );
        assert_eq!(
            k(post_key("a", P)),
            Some(Kind::Post {
                author: "a".into(),
                post: P.into()
            })
        );
        assert_eq!(
            k(like_key(P, "u")),
            Some(Kind::Like {
                post: P.into(),
                user: "u".into()
            })
        );
        assert_eq!(
            k(likecount_key(P)),
            Some(Kind::LikeCount { post: P.into() })
        );
        assert_eq!(
            k(timeline_key("f", P, "a")),
            Some(Kind::Timeline {
                follower: "f".into(),
                post: P.into(),
                author: "a".into()
            })
        );
    }

    #[test]
    fn unknown_shapes_are_no_kind() {
        for (pk, sk) in [
            ("u#a", "profile"),
            ("u#", "info"),
            ("u#a#following", "x#b"),
            ("u#a#following", "u#"),
            ("u#a#b#following", "u#c"),
            ("u#a#post", "p#"),
            ("u#a#post", "x"),
            ("p#1#likelist", "v#u"),
            ("p#1#likecount", "total"),
            ("p#1#other", "count"),
            ("u#f#timeline", "p#1"),
            ("u#f#timeline", "p#1#u#"),
            ("x#a", "info"),
        ] {
            assert_eq!(kind(pk, sk), None, "{pk} / {sk}");
        }
    }

    #[test]
    fn ulids_are_canonical_and_sort_by_time() {
        assert!(valid_ulid(P));
        assert!(!valid_ulid("01hzy3m5x7q8r9s0t1v2w3x4y5"), "lower case");
        assert!(
            !valid_ulid("01HZY3M5X7Q8R9S0T1V2W3X4YU"),
            "U is not Crockford"
        );
        assert!(
            !valid_ulid("81HZY3M5X7Q8R9S0T1V2W3X4Y5"),
            "over 48 bits of time"
        );
        assert!(!valid_ulid("01HZY3M5X7"));
        let a = ulid(1_700_000_000_000, 5);
        let b = ulid(1_700_000_000_001, 0);
        assert!(valid_ulid(&a) && valid_ulid(&b));
        assert!(a < b, "later time sorts later");
        assert_eq!(ulid(0, 0), "0".repeat(26));
        assert_eq!(
            &ulid(1_469_918_176_385, 0)[..10],
            "01ARYZ6S41",
            "spec example"
        );
    }
}
