//! The writes each end-to-end workload makes, as a writer application
//! makes them: items written whole (a later write of the same key replaces
//! it), some deleted. Built from the shipped files' key templates and
//! attributes alone (no model's Rust), so the same writes go to a model
//! file and to whatever `--model NAME` is.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item};

/// One write of a workload, and its lane: writes of one lane are made in
/// order, lanes concurrently (one lane: the same stream order every run).
pub enum Write {
    Put(Item),
    Delete(Item),
}

pub struct Workload {
    /// What it is (printed).
    pub name: &'static str,
    /// The registered model it runs as (`--model NAME`).
    pub model: &'static str,
    /// Its file under `models/`.
    pub file: &'static str,
    /// Writes per lane.
    pub lanes: Vec<Vec<Write>>,
}

impl Workload {
    pub fn changes(&self) -> usize {
        self.lanes.iter().map(Vec::len).sum()
    }
}

fn item(pairs: Vec<(&str, AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn b(v: bool) -> AttributeValue {
    AttributeValue::Bool(v)
}

/// A canonical ULID of (milliseconds, number).
pub fn ulid(ms: u64, n: u64) -> String {
    const CROCKFORD: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let v = (u128::from(ms) << 80) | u128::from(n);
    (0..26)
        .rev()
        .map(|i| CROCKFORD[((v >> (5 * i)) & 31) as usize] as char)
        .collect()
}

fn id(n: u64) -> String {
    ulid(1_767_600_000_000 + n * 1000, n)
}

/// An ISO-8601 UTC time `secs` after a fixed start.
fn at(secs: u64) -> String {
    let t = chrono::DateTime::from_timestamp(1_798_761_600 + secs as i64, 0).unwrap_or_default();
    t.format("%Y-%m-%dT%H:%M:%S.000Z").to_string()
}

/// HR (`models/hr.yaml`): an organisation, 4 departments, `emps`
/// employees written twice (moved to another department, one in five
/// made inactive), a job per five employees (opened, then one in two
/// closed), an application per job, one bad employee in fifty.
pub fn hr(emps: usize) -> Workload {
    let org = id(1);
    let depts: Vec<String> = (0..4).map(|d| id(10 + d)).collect();
    let mut w = vec![Write::Put(item(vec![
        ("PK", s(format!("ORG#{org}"))),
        ("SK", s("#METADATA")),
        ("type", s("org")),
        ("orgId", s(&org)),
        ("name", s("Acme")),
        ("plan", s("pro")),
        ("status", s("active")),
        ("createdAt", s(at(0))),
    ]))];
    for d in &depts {
        w.push(Write::Put(item(vec![
            ("PK", s(format!("ORG#{org}"))),
            ("SK", s(format!("DEPT#{d}"))),
            ("type", s("dept")),
            ("deptId", s(d)),
            ("orgId", s(&org)),
            ("name", s("Dept")),
            ("managerId", s(id(2))),
        ])));
    }
    let emp = |e: u64, dept: &str, status: &str| {
        let emp_id = if e % 50 == 49 {
            "not-a-ulid".to_string()
        } else {
            id(1000 + e)
        };
        item(vec![
            ("PK", s(format!("ORG#{org}"))),
            ("SK", s(format!("EMP#{emp_id}"))),
            ("type", s("emp")),
            ("empId", s(emp_id)),
            ("orgId", s(&org)),
            ("email", s(format!("E{e}@Acme.co"))),
            ("firstName", s("E")),
            ("lastName", s("Example")),
            ("departmentId", s(dept)),
            ("role", s("employee")),
            ("status", s(status)),
            ("hiredAt", s("2026-01-06")),
        ])
    };
    let job = |j: u64, status: &str| {
        let (job_id, posted) = (id(5000 + j), id(9000 + j));
        item(vec![
            ("PK", s(format!("ORG#{org}"))),
            ("SK", s(format!("JOB#{posted}#{job_id}"))),
            ("type", s("job")),
            ("jobId", s(job_id)),
            ("orgId", s(&org)),
            ("departmentId", s(&depts[(j % 4) as usize])),
            ("title", s("Engineer")),
            ("status", s(status)),
            ("postedAt", s(posted)),
        ])
    };
    for round in 0..2u64 {
        for e in 0..emps as u64 {
            let d = &depts[((e + round) % 4) as usize];
            let status = if round == 1 && e % 5 == 0 {
                "inactive"
            } else {
                "active"
            };
            w.push(Write::Put(emp(e, d, status)));
            if e % 5 == 0 {
                let j = e / 5;
                let status = if round == 1 && j % 2 == 0 {
                    "closed"
                } else {
                    "open"
                };
                w.push(Write::Put(job(j, status)));
                if round == 0 {
                    let (app_id, submitted) = (id(20_000 + j), id(30_000 + j));
                    w.push(Write::Put(item(vec![
                        ("PK", s(format!("JOB#{}", id(5000 + j)))),
                        ("SK", s(format!("APP#{submitted}#{app_id}"))),
                        ("type", s("app")),
                        ("appId", s(app_id)),
                        ("jobId", s(id(5000 + j))),
                        ("empId", s(id(1000 + e))),
                        ("status", s("applied")),
                        ("submittedAt", s(submitted)),
                    ])));
                }
            }
        }
    }
    Workload {
        name: "HR",
        model: "hr",
        file: "hr.yaml",
        lanes: vec![w],
    }
}

/// Social (`models/social.yaml`): `users` users, each following the next
/// five, two posts each (timelines fanned out through the queue), three
/// likes per post, then one follow in five deleted and one bad follow in
/// fifty.
pub fn social(users: usize) -> Workload {
    let u = |i: usize| format!("user{:04}", i % users);
    let mut w = Vec::new();
    for i in 0..users {
        w.push(Write::Put(item(vec![
            ("PK", s(format!("u#{}", u(i)))),
            ("SK", s("info")),
            ("name", s("User")),
        ])));
    }
    let follow = |a: usize, b: usize| {
        item(vec![
            ("PK", s(format!("u#{}#following", u(a)))),
            ("SK", s(format!("u#{}", u(b)))),
            ("createdAt", s(at(a as u64))),
        ])
    };
    for i in 0..users {
        for k in 1..=5 {
            w.push(Write::Put(follow(i, i + k)));
        }
    }
    let mut posts = Vec::new();
    for i in 0..users {
        for p in 0..2u64 {
            let post = id(100_000 + 2 * i as u64 + p);
            w.push(Write::Put(item(vec![
                ("PK", s(format!("u#{}#post", u(i)))),
                ("SK", s(format!("p#{post}"))),
                ("postId", s(&post)),
                ("body", s("Hello")),
                ("createdAt", s(at(1000 + i as u64))),
            ])));
            posts.push((i, post));
        }
    }
    for (i, post) in &posts {
        for k in 1..=3 {
            w.push(Write::Put(item(vec![
                ("PK", s(format!("p#{post}#likelist"))),
                ("SK", s(format!("u#{}", u(i + k)))),
                ("createdAt", s(at(2000 + *i as u64))),
            ])));
        }
    }
    for i in (0..users).step_by(5) {
        w.push(Write::Delete(item(vec![
            ("PK", s(format!("u#{}#following", u(i)))),
            ("SK", s(format!("u#{}", u(i + 1)))),
        ])));
    }
    for i in (0..users).step_by(50) {
        // Bad input: a user following themselves.
        w.push(Write::Put(follow(i, i)));
    }
    Workload {
        name: "social",
        model: "social",
        file: "social.yaml",
        lanes: vec![w],
    }
}

/// The tracker (`models/tracker.yaml`, its history fold included): the
/// handlers bench's ten changes per application (created, status, two
/// stages, a stage completed, notes, a bare update, archived, restored,
/// a salary), in `lanes` lanes of applications.
pub fn tracker(apps: usize, lanes: usize) -> Workload {
    let mut out: Vec<Vec<Write>> = (0..lanes.max(1)).map(|_| Vec::new()).collect();
    for a in 0..apps {
        let id = format!("app{a:05}");
        let mut t = 0u64;
        let mut next = || {
            t += 1;
            at(t)
        };
        let created = next();
        let mut app = item(vec![
            ("PK", s(format!("APP#{id}"))),
            ("SK", s(format!("APP#{id}"))),
            ("id", s(&id)),
            ("companyName", s("Bench Co")),
            ("positionTitle", s("Engineer")),
            ("status", s("applied")),
            ("isArchived", b(false)),
            ("createdAt", s(&created)),
            ("updatedAt", s(&created)),
        ]);
        let stage = |sid: &str, name: &str, order: i64, done: bool| {
            item(vec![
                ("PK", s(format!("APP#{id}"))),
                ("SK", s(format!("STAGE#{sid}"))),
                ("id", s(sid)),
                ("applicationId", s(&id)),
                ("name", s(name)),
                ("order", n(order)),
                ("isCompleted", b(done)),
            ])
        };
        let lane = &mut out[a % lanes.max(1)];
        lane.push(Write::Put(app.clone()));
        let mut update = |lane: &mut Vec<Write>, set: Vec<(&str, AttributeValue)>, at: String| {
            for (k, v) in set {
                app.insert(k.to_string(), v);
            }
            app.insert("updatedAt".into(), s(at));
            lane.push(Write::Put(app.clone()));
        };
        update(lane, vec![("status", s("interviewing"))], next());
        lane.push(Write::Put(stage("s1", "Screen", 1, false)));
        lane.push(Write::Put(stage("s2", "Onsite", 2, false)));
        lane.push(Write::Put(stage("s1", "Screen", 1, true)));
        update(lane, vec![("notes", s("good call"))], next());
        update(lane, vec![], next());
        update(lane, vec![("isArchived", b(true))], next());
        update(lane, vec![("isArchived", b(false))], next());
        update(lane, vec![("salaryMin", n(100_000))], next());
    }
    Workload {
        name: "tracker",
        model: "tracker",
        file: "tracker.yaml",
        lanes: out,
    }
}

const EVENTS: [(&str, &str); 4] = [
    ("2024-03-03", "revolution"),
    ("2024-04-06", "dynasty"),
    ("2024-05-26", "double-or-nothing"),
    ("2024-06-30", "forbidden-door"),
];

/// Pick'Em (`models/pickem.yaml`): 4 events of 3 matches, `users` users
/// each predicting every event, then every match's result (each result
/// starts a scoring job over its event's predictions, through the queue:
/// points computed, standings summed), and one bad prediction in fifty.
pub fn pickem(users: usize) -> Workload {
    let mut w = Vec::new();
    let a_match = |date: &str, slug: &str, m: i64, result: Option<i64>| {
        let team = |t: &str| {
            AttributeValue::M([("members".to_string(), AttributeValue::L(vec![s(t)]))].into())
        };
        let mut i = item(vec![
            ("PK", s(format!("EVENT#{date}-{slug}"))),
            ("SK", s(format!("MATCH#m{m}"))),
            ("type", s("match")),
            ("id", s(format!("m{m}"))),
            ("name", s("Match")),
            ("order", n(m)),
            ("points", n(10 * (m + 1))),
            ("preshow", b(false)),
            ("championships", AttributeValue::L(vec![])),
            ("teams", AttributeValue::L(vec![team("A"), team("B")])),
        ]);
        if let Some(r) = result {
            i.insert("result".into(), n(r));
        }
        i
    };
    for (date, slug) in EVENTS {
        w.push(Write::Put(item(vec![
            ("PK", s("EVENT")),
            ("SK", s(format!("EVENT#{date}#{slug}"))),
            ("type", s("event")),
            ("date", s(date.replace('-', "/"))),
            ("name", s("Event")),
            ("state", s("upcoming")),
        ])));
        for m in 0..3 {
            w.push(Write::Put(a_match(date, slug, m, None)));
        }
    }
    for u in 0..users {
        w.push(Write::Put(item(vec![
            ("PK", s(format!("USER#u{u}"))),
            ("SK", s("USER")),
            ("type", s("user")),
            ("name", s("User")),
        ])));
        for (date, slug) in EVENTS {
            let picks: std::collections::HashMap<String, AttributeValue> = (0..3)
                .map(|m| {
                    let pick = if u % 50 == 49 && m == 0 {
                        -1
                    } else {
                        ((u + m) % 2) as i64
                    };
                    (format!("m{m}"), n(pick))
                })
                .collect();
            w.push(Write::Put(item(vec![
                ("PK", s(format!("USER#u{u}"))),
                ("SK", s(format!("EVENT#{date}-{slug}"))),
                ("type", s("prediction")),
                ("predictions", AttributeValue::M(picks)),
            ])));
        }
    }
    for (date, slug) in EVENTS {
        for m in 0..3 {
            w.push(Write::Put(a_match(date, slug, m, Some(m % 2))));
        }
    }
    Workload {
        name: "Pick'Em",
        model: "pickem",
        file: "pickem.yaml",
        lanes: vec![w],
    }
}
