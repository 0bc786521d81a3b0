//! Writer items of the shipped seeds as item literals (the keys and
//! attributes `models/<seed>.yaml` declares), for the benchmarks and the
//! integration tests (which include this file by path): what an
//! application of each seed writes, built without the model's own code.

#![allow(dead_code, unused_imports)] // each benchmark and test uses part of it

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{s, Item};

/// An item of these attributes.
pub fn attrs<'a>(pairs: impl IntoIterator<Item = (&'a str, AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

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

/// The `n`th of a series of ULIDs a second apart (from 2026-01-05).
pub fn nth_ulid(n: u64) -> String {
    ulid(1_767_600_000_000 + n * 1000, u128::from(n))
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

/// Pick'Em (`models/pickem.yaml`): events, their matches (single-member
/// teams A and B), users and their predictions.
pub mod pickem {
    use super::attrs as item;
    use aws_sdk_dynamodb::types::AttributeValue;
    use shared::item::{n, s, Item};

    /// An event of `date` (`YYYY-MM-DD`); its id is `<date>-<slug>`.
    pub fn event(date: &str, slug: &str, name: &str, state: &str) -> Item {
        item([
            ("PK", s("EVENT")),
            ("SK", s(format!("EVENT#{date}#{slug}"))),
            ("type", s("event")),
            ("date", s(date.replace('-', "/"))),
            ("name", s(name)),
            ("state", s(state)),
        ])
    }

    /// Match `id` of event `event` (its id), with its result when set.
    pub fn a_match(event: &str, id: &str, order: i64, points: i64, result: Option<i64>) -> Item {
        let team = |m: &str| {
            AttributeValue::M([("members".to_string(), AttributeValue::L(vec![s(m)]))].into())
        };
        let mut m = item([
            ("PK", s(format!("EVENT#{event}"))),
            ("SK", s(format!("MATCH#{id}"))),
            ("type", s("match")),
            ("id", s(id)),
            ("name", s(id)),
            ("order", n(order)),
            ("points", n(points)),
            ("preshow", AttributeValue::Bool(false)),
            ("championships", AttributeValue::L(vec![])),
            ("teams", AttributeValue::L(vec![team("A"), team("B")])),
        ]);
        if let Some(r) = result {
            m.insert("result".into(), n(r));
        }
        m
    }

    pub fn user(user: &str) -> Item {
        item([
            ("PK", s(format!("USER#{user}"))),
            ("SK", s("USER")),
            ("type", s("user")),
            ("name", s("User")),
        ])
    }

    /// A user's picks (match id, team) for event `event`.
    pub fn prediction(user: &str, event: &str, picks: &[(String, i64)]) -> Item {
        item([
            ("PK", s(format!("USER#{user}"))),
            ("SK", s(format!("EVENT#{event}"))),
            ("type", s("prediction")),
            (
                "predictions",
                AttributeValue::M(picks.iter().map(|(m, t)| (m.clone(), n(*t))).collect()),
            ),
        ])
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

/// The job board of `--model jobboard` (models/jobboard.yaml): its key
/// formats, what an application writes (jobs, seekers, employers,
/// requests, approvals, closings) and the bodies of its jobs.
pub mod jobboard {
    use aws_sdk_dynamodb::types::AttributeValue;
    use shared::item::{n, s, Item, ItemExt};

    pub const PK: &str = "pk";
    pub const SK: &str = "sk";
    pub const PROFILE_SK: &str = "profile";

    /// `<city>` in keys: trimmed, lower case, each run of white space one
    /// `-` (the file's `formats: city: { normalize: dashed }`).
    pub fn normalize_city(city: &str) -> String {
        city.split_whitespace()
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join("-")
    }

    pub fn job_pk(city: &str) -> String {
        format!("job#{}", normalize_city(city))
    }

    pub fn job_sk(posted: &str, zip: &str, job_id: &str) -> String {
        format!("j#{posted}#{zip}#{job_id}")
    }

    pub fn employer_pk(employer_id: &str) -> String {
        format!("employer#{employer_id}")
    }

    pub fn seeker_pk(seeker_id: &str) -> String {
        format!("seeker#{seeker_id}")
    }

    pub fn request_sk(job_id: &str, seeker_id: &str) -> String {
        format!("r#{job_id}#{seeker_id}")
    }

    pub fn suggestion_sk(job_id: &str, seeker_id: &str) -> String {
        format!("s#{job_id}#{seeker_id}")
    }

    /// `j#R<level>#<posted>#<zip>#<jobId>`: a suggestion's GSI1SK.
    pub fn suggestion_gsi1sk(level: u8, posted: &str, zip: &str, job_id: &str) -> String {
        format!("j#R{level}#{posted}#{zip}#{job_id}")
    }

    /// `days` days before today (UTC), as `YYYY-MM-DD`.
    pub fn days_ago(days: i64) -> String {
        (chrono::Utc::now().date_naive() - chrono::Duration::days(days)).to_string()
    }

    /// Relevance in basis points as SPEC §4 defines it (the oracle the
    /// tests hold the file's `sets: suggestions` to): 6000 x the share of
    /// the job's skills the seeker has (6000 without skills), 2500 when
    /// the desired salary is within the maximum (1250 within 10 % above),
    /// 1500 when the job's category is one of the seeker's.
    pub fn score(
        job_skills: &[&str],
        salary_max: Option<i64>,
        category: Option<&str>,
        seeker_skills: &[&str],
        desired: Option<i64>,
        categories: &[&str],
    ) -> i64 {
        let skills = if job_skills.is_empty() {
            6000
        } else {
            let have = job_skills
                .iter()
                .filter(|k| seeker_skills.contains(k))
                .count() as i64;
            6000 * have / job_skills.len() as i64
        };
        let salary = match (desired, salary_max) {
            (Some(d), Some(m)) if d > m => {
                if m >= 0 && d - m <= m / 10 {
                    1250
                } else {
                    0
                }
            }
            _ => 2500,
        };
        let category = match category {
            Some(c) if categories.contains(&c) => 1500,
            _ => 0,
        };
        skills + salary + category
    }

    /// R1 from 7500, R2 from 5000, R3 from 3000; below, no suggestion.
    pub fn level(score: i64) -> Option<u8> {
        match score {
            s if s >= 7500 => Some(1),
            s if s >= 5000 => Some(2),
            s if s >= 3000 => Some(3),
            _ => None,
        }
    }

    /// A job posting.
    #[derive(Clone)]
    pub struct NewJob<'a> {
        pub job_id: &'a str,
        pub employer_id: &'a str,
        pub city: &'a str,
        pub posted_at: String,
        pub zip: &'a str,
        pub title: &'a str,
        pub skills: &'a [&'a str],
        pub category: &'a str,
        pub salary_max: i64,
    }

    fn ss(v: &[&str]) -> AttributeValue {
        AttributeValue::Ss(v.iter().map(|s| s.to_string()).collect())
    }

    impl NewJob<'_> {
        pub fn sk(&self) -> String {
            job_sk(&self.posted_at, self.zip, self.job_id)
        }

        pub fn item(&self) -> Item {
            super::attrs([
                (PK, s(job_pk(self.city))),
                (SK, s(self.sk())),
                ("entityType", s("job")),
                ("jobId", s(self.job_id)),
                ("employerId", s(self.employer_id)),
                ("city", s(self.city)),
                ("postedAt", s(&self.posted_at)),
                ("zip", s(self.zip)),
                ("title", s(self.title)),
                (
                    "description",
                    s(format!("{} at {}", self.title, self.employer_id)),
                ),
                ("skills", ss(self.skills)),
                ("category", s(self.category)),
                ("salaryMin", n(self.salary_max * 8 / 10)),
                ("salaryMax", n(self.salary_max)),
                ("status", s("open")),
            ])
        }
    }

    /// The jobs of models/jobboard.scenario.yaml: j1, j2 in Montreal
    /// (2 and 5 days old), j3 in Toronto (1 day), j4 in Montreal (45
    /// days: no candidate).
    pub fn jobs() -> Vec<NewJob<'static>> {
        // (id, city, days old, zip), (title, skills, maximum salary)
        type Role = (&'static str, &'static [&'static str], i64);
        let job = |(job_id, city, days, zip): (&'static str, _, _, _),
                   (title, skills, salary_max): Role| NewJob {
            job_id,
            employer_id: if job_id == "j3" { "e2" } else { "e1" },
            city,
            posted_at: days_ago(days),
            zip,
            title,
            skills,
            category: "tech",
            salary_max,
        };
        vec![
            job(
                ("j1", "Montreal", 2, "H2X"),
                ("Rust engineer", &["aws", "rust"], 130_000),
            ),
            job(
                ("j2", "Montreal", 5, "H3B"),
                ("Go engineer", &["go", "k8s"], 110_000),
            ),
            job(
                ("j3", "Toronto", 1, "M5V"),
                ("Systems engineer", &["rust"], 150_000),
            ),
            job(
                ("j4", "Montreal", 45, "H2X"),
                ("Old Rust role", &["rust"], 130_000),
            ),
        ]
    }

    /// What an application of the job board writes (GSI1 keys, suggestions
    /// and matches are the processors').
    #[derive(Clone)]
    pub struct Writer {
        pub client: aws_sdk_dynamodb::Client,
        pub table: String,
    }

    fn failed(what: &str, e: impl std::fmt::Debug) -> String {
        format!("{what}: {e:?}")
    }

    impl Writer {
        pub fn new(client: aws_sdk_dynamodb::Client, table: &str) -> Self {
            Self {
                client,
                table: table.into(),
            }
        }

        pub async fn put(&self, i: Item) -> Result<(), String> {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(i))
                .send()
                .await
                .map_err(|e| failed("PutItem", e))?;
            Ok(())
        }

        pub async fn employer(&self, id: &str, name: &str) -> Result<(), String> {
            self.put(super::attrs([
                (PK, s(employer_pk(id))),
                (SK, s(PROFILE_SK)),
                ("entityType", s("employer")),
                ("employerId", s(id)),
                ("name", s(name)),
            ]))
            .await
        }

        /// Access pattern 6: create a job, refusing to overwrite one.
        pub async fn create_job(&self, job: &NewJob<'_>) -> Result<(), String> {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(job.item()))
                .condition_expression("attribute_not_exists(pk) AND attribute_not_exists(sk)")
                .send()
                .await
                .map_err(|e| failed("creating a job", e))?;
            Ok(())
        }

        pub async fn seeker(
            &self,
            id: &str,
            name: &str,
            city: &str,
            skills: &[&str],
            desired: i64,
            categories: &[&str],
        ) -> Result<(), String> {
            let mut i = super::attrs([
                (PK, s(seeker_pk(id))),
                (SK, s(PROFILE_SK)),
                ("entityType", s("seeker")),
                ("seekerId", s(id)),
                ("name", s(name)),
                ("city", s(city)),
                ("skills", ss(skills)),
                ("desiredSalary", n(desired)),
            ]);
            if !categories.is_empty() {
                i.insert("categories".into(), ss(categories));
            }
            self.put(i).await
        }

        /// A seeker's swipe right.
        pub async fn request(
            &self,
            job: &NewJob<'_>,
            seeker_id: &str,
            requested_at: &str,
        ) -> Result<(), String> {
            self.put(super::attrs([
                (PK, s(employer_pk(job.employer_id))),
                (SK, s(request_sk(job.job_id, seeker_id))),
                ("entityType", s("request")),
                ("employerId", s(job.employer_id)),
                ("jobId", s(job.job_id)),
                ("seekerId", s(seeker_id)),
                ("status", s("pending")),
                ("requestedAt", s(requested_at)),
                ("jobCity", s(job.city)),
                ("jobPostedAt", s(&job.posted_at)),
                ("jobZip", s(job.zip)),
            ]))
            .await
        }

        /// A request's status (and the day: `approvedAt`).
        pub async fn set_request_status(
            &self,
            employer_id: &str,
            job_id: &str,
            seeker_id: &str,
            status: &str,
            day: &str,
        ) -> Result<(), String> {
            self.client
                .update_item()
                .table_name(&self.table)
                .key(PK, s(employer_pk(employer_id)))
                .key(SK, s(request_sk(job_id, seeker_id)))
                .update_expression("SET #s = :s, approvedAt = :d")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":s", s(status))
                .expression_attribute_values(":d", s(day))
                .send()
                .await
                .map_err(|e| failed("updating a request", e))?;
            Ok(())
        }

        pub async fn close_job(&self, job: &NewJob<'_>) -> Result<(), String> {
            self.client
                .update_item()
                .table_name(&self.table)
                .key(PK, s(job_pk(job.city)))
                .key(SK, s(job.sk()))
                .update_expression("SET #s = :closed")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":closed", s("closed"))
                .send()
                .await
                .map_err(|e| failed("closing a job", e))?;
            Ok(())
        }

        /// A seeker's suggestions by relevance, best first (GSI1,
        /// `begins_with(GSI1SK, 'j#R')`), as `<jobId> R<level>`.
        pub async fn suggestions_of(&self, seeker: &str) -> Result<Vec<String>, String> {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("GSI1")
                .key_condition_expression("GSI1PK = :pk AND begins_with(GSI1SK, :r)")
                .expression_attribute_values(":pk", s(seeker_pk(seeker)))
                .expression_attribute_values(":r", s("j#R"))
                .send()
                .await
                .map_err(|e| failed("Query", e))?;
            Ok(out
                .items()
                .iter()
                .map(|i| {
                    let level = i.s("GSI1SK").unwrap_or_default().chars().nth(3);
                    format!(
                        "{} R{}",
                        i.s("jobId").unwrap_or_default(),
                        level.unwrap_or('?')
                    )
                })
                .collect())
        }
    }

    fn join_job(scope: &str, bind: &[(&str, String)]) -> String {
        shared::engine::joinset::JoinJob {
            set: "suggestions".into(),
            scope: scope.into(),
            bind: bind
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            step: 0,
            after: None,
        }
        .encode()
    }

    /// The job that scores a job against its city's seekers (the join
    /// set's `job` scope).
    pub fn job_opened(job: &NewJob<'_>) -> String {
        join_job(
            "job",
            &[
                ("city", normalize_city(job.city)),
                ("postedAt", job.posted_at.clone()),
                ("zip", job.zip.to_string()),
                ("jobId", job.job_id.to_string()),
                ("employerId", job.employer_id.to_string()),
            ],
        )
    }

    /// The job that rescores a seeker against the jobs of its city
    /// (normalised) (the join set's `seeker` scope).
    pub fn seeker_changed(seeker: &str, city: &str) -> String {
        join_job(
            "seeker",
            &[("seekerId", seeker.to_string()), ("city", city.to_string())],
        )
    }

    /// The job that makes a pair's match once (`once: matches`): the
    /// request's values it reads.
    pub fn match_job(values: &[(&str, &str)]) -> String {
        serde_json::json!({
            "version": 1,
            "once": "matches",
            "values": values
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect::<serde_json::Map<_, _>>(),
        })
        .to_string()
    }
}
