//! Writer items of the shipped seeds as item literals (the keys and
//! attributes `models/<seed>.yaml` declares), for the benchmarks and the
//! integration tests (which include this file by path): what an
//! application of each seed writes, built without the model's own code.

#![allow(dead_code, unused_imports)] // each benchmark and test uses part of it

use shared::item::{s, Item};

fn item(pairs: &[(&str, &str)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), s(*v)))
        .collect()
}

/// A deterministic ULID: `ms` milliseconds since the epoch, then `n`.
pub fn ulid(ms: u64, n: u128) -> String {
    ulid::Ulid::from_parts(ms, n).to_string()
}

/// The HR SaaS of seed 003 (`models/hr.yaml`).
pub mod hr {
    use super::item;
    pub use super::ulid;
    use shared::item::Item;

    pub const PK: &str = "PK";
    pub const SK: &str = "SK";
    /// The department's count of its active employees.
    pub const HEADCOUNT: &str = "headcount";
    /// The organisation's sort key.
    pub const METADATA_SK: &str = "#METADATA";
    /// The job lookup item's sort key.
    pub const META_SK: &str = "#META";

    pub fn org_pk(org: &str) -> String {
        format!("ORG#{org}")
    }
    /// `DEPT#<deptId>`: a department's sort key, its DeptEmployees' partition.
    pub fn dept_key(dept: &str) -> String {
        format!("DEPT#{dept}")
    }
    /// `EMP#<empId>`: an employee's sort key, a DeptEmployee's too.
    pub fn emp_key(emp: &str) -> String {
        format!("EMP#{emp}")
    }
    pub fn job_sk(posted_at: &str, job: &str) -> String {
        format!("JOB#{posted_at}#{job}")
    }
    /// `JOB#<jobId>`: a posting's applications and its lookup item.
    pub fn job_pk(job: &str) -> String {
        format!("JOB#{job}")
    }
    pub fn app_sk(submitted_at: &str, app: &str) -> String {
        format!("APP#{submitted_at}#{app}")
    }
    pub fn open_jobs_gsi1pk(org: &str) -> String {
        format!("ORG#{org}#OPEN")
    }

    pub fn org(org: &str, name: &str, plan: &str) -> Item {
        item(&[
            ("PK", &org_pk(org)),
            ("SK", METADATA_SK),
            ("type", "org"),
            ("orgId", org),
            ("name", name),
            ("plan", plan),
            ("status", "active"),
            ("createdAt", "2026-01-05T09:00:00.000Z"),
        ])
    }

    pub fn dept(org: &str, dept: &str, name: &str, manager: &str) -> Item {
        item(&[
            ("PK", &org_pk(org)),
            ("SK", &dept_key(dept)),
            ("type", "dept"),
            ("deptId", dept),
            ("orgId", org),
            ("name", name),
            ("managerId", manager),
        ])
    }

    /// An active employee with role `employee`.
    pub fn emp(org: &str, emp: &str, email: &str, first: &str, dept: &str) -> Item {
        item(&[
            ("PK", &org_pk(org)),
            ("SK", &emp_key(emp)),
            ("type", "emp"),
            ("empId", emp),
            ("orgId", org),
            ("email", email),
            ("firstName", first),
            ("lastName", "Example"),
            ("departmentId", dept),
            ("role", "employee"),
            ("status", "active"),
            ("hiredAt", "2026-01-06"),
        ])
    }

    pub fn job(
        org: &str,
        job: &str,
        posted_at: &str,
        dept: &str,
        title: &str,
        status: &str,
    ) -> Item {
        item(&[
            ("PK", &org_pk(org)),
            ("SK", &job_sk(posted_at, job)),
            ("type", "job"),
            ("jobId", job),
            ("orgId", org),
            ("departmentId", dept),
            ("title", title),
            ("status", status),
            ("postedAt", posted_at),
        ])
    }

    pub fn app(job: &str, app: &str, submitted_at: &str, emp: &str, status: &str) -> Item {
        item(&[
            ("PK", &job_pk(job)),
            ("SK", &app_sk(submitted_at, app)),
            ("type", "app"),
            ("appId", app),
            ("jobId", job),
            ("empId", emp),
            ("status", status),
            ("submittedAt", submitted_at),
        ])
    }
}

/// The social network of seed 002 (`models/social.yaml`).
pub mod social {
    pub use super::ulid;
    use shared::item::{s, Item};

    pub const PK: &str = "PK";
    pub const SK: &str = "SK";
    pub const TTL: &str = "ttl";
    /// The entity type attribute of processor items.
    pub const TYPE: &str = "type";
    pub const TYPE_FOLLOWER: &str = "follower";
    pub const COUNT_SK: &str = "count";
    pub const FOLLOWERS: &str = "followers";
    pub const FOLLOWING: &str = "following";
    pub const POSTS: &str = "posts";
    pub const LIKES: &str = "likes";
    /// A post's (and its timeline entries') lifetime: ttl = createdAt + this.
    pub const POST_TTL_SECS: i64 = 604_800;

    /// `u#<userId>`.
    pub fn user(user: &str) -> String {
        format!("u#{user}")
    }
    /// `u#<A>#following`: whom A follows.
    pub fn following_pk(user: &str) -> String {
        format!("u#{user}#following")
    }
    /// `u#<B>#follower`: who follows B (the processor's mirrors).
    pub fn follower_pk(user: &str) -> String {
        format!("u#{user}#follower")
    }
    /// `u#<userId>#post`: a user's posts.
    pub fn post_pk(user: &str) -> String {
        format!("u#{user}#post")
    }
    /// `p#<postId>#likelist`: who liked a post.
    pub fn likelist_pk(post: &str) -> String {
        format!("p#{post}#likelist")
    }
    /// `u#<followerId>#timeline`: a user's timeline.
    pub fn timeline_pk(user: &str) -> String {
        format!("u#{user}#timeline")
    }
    /// `p#<postId>#u#<authorId>`: a timeline entry's sort key.
    pub fn timeline_sk(post: &str, author: &str) -> String {
        format!("p#{post}#u#{author}")
    }

    /// A `PK`/`SK` key item.
    pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
        [(PK.to_string(), s(pk)), (SK.to_string(), s(sk))].into()
    }
    pub fn user_counts_key(user: &str) -> Item {
        key(self::user(user), COUNT_SK)
    }
    /// The follow item of "`follower` follows `followed`".
    pub fn follow_key(follower: &str, followed: &str) -> Item {
        key(following_pk(follower), user(followed))
    }
    /// The follower mirror of "`follower` follows `followed`".
    pub fn mirror_key(follower: &str, followed: &str) -> Item {
        key(follower_pk(followed), user(follower))
    }
    pub fn post_key(author: &str, post: &str) -> Item {
        key(post_pk(author), format!("p#{post}"))
    }
    pub fn like_key(post: &str, user: &str) -> Item {
        key(likelist_pk(post), self::user(user))
    }
    /// `p#<postId>#likecount`: a post's like count (SK `count`).
    pub fn likecount_pk(post: &str) -> String {
        format!("p#{post}#likecount")
    }
    pub fn likecount_key(post: &str) -> Item {
        key(likecount_pk(post), COUNT_SK)
    }
    pub fn timeline_key(follower: &str, post: &str, author: &str) -> Item {
        key(timeline_pk(follower), timeline_sk(post, author))
    }

    pub fn user_item(id: &str, name: &str) -> Item {
        let mut i = key(user(id), "info");
        i.insert("name".into(), s(name));
        i
    }
    pub fn follow_item(follower: &str, followed: &str, at: &str) -> Item {
        let mut i = follow_key(follower, followed);
        i.insert("createdAt".into(), s(at));
        i
    }
    pub fn post_item(author: &str, post: &str, at: &str, body: &str) -> Item {
        let mut i = post_key(author, post);
        i.insert("postId".into(), s(post));
        i.insert("createdAt".into(), s(at));
        i.insert("body".into(), s(body));
        i
    }
    pub fn like_item(post: &str, user: &str, at: &str) -> Item {
        let mut i = like_key(post, user);
        i.insert("createdAt".into(), s(at));
        i
    }
}

/// The timeline of `--model social`: the file's join set (`sets:
/// timeline`) and the bodies of its jobs.
pub mod timeline {
    use shared::engine::joinset::{JoinJob, JoinSet, Vars};

    /// The timeline join set of the shipped models/social.yaml, `page`
    /// candidates per job.
    pub fn set(page: usize) -> JoinSet {
        let loaded = shared::file::shipped("social")
            .expect("models/social.yaml is shipped")
            .expect("models/social.yaml loads");
        let spec = loaded
            .model
            .sets
            .iter()
            .find(|s| s.name == "timeline")
            .expect("the timeline set");
        let mut set = spec.declaration(&loaded.model);
        set.page = page;
        set
    }

    fn job(scope: &str, bind: &[(&str, &str)]) -> String {
        JoinJob {
            set: "timeline".into(),
            scope: scope.into(),
            bind: bind
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vars>(),
            step: 0,
            after: None,
        }
        .encode()
    }

    /// The job a post (created, deleted) starts: its entries on every
    /// follower's timeline.
    pub fn post_job(author: &str, post: &str) -> String {
        job("post", &[("a", author), ("p", post)])
    }

    /// The job a follow (created, deleted) starts: the author's entries on
    /// the follower's timeline.
    pub fn follow_job(follower: &str, author: &str) -> String {
        job("follow", &[("f", follower), ("a", author)])
    }
}
