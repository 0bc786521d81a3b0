//! The writes each end-to-end workload makes, as a writer application
//! makes them: items written whole (a later write of the same key replaces
//! it), some deleted. Built from the shipped files' key templates and
//! attributes alone (`seed_items`, the tracker's `apps.rs` shared with the
//! integration tests; no model's Rust).

#![allow(dead_code)] // each benchmark uses part of it

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item};

use crate::apps::{application, stage};
use crate::seed_items::{hr as h, nth_ulid as id, pickem as p, social as so};

/// One write of a workload, and its lane: writes of one lane are made in
/// order, lanes concurrently (one lane: the same stream order every run).
#[derive(Clone)]
pub enum Write {
    Put(Item),
    Delete(Item),
}

pub struct Workload {
    /// What it is (printed).
    pub name: &'static str,
    /// The shipped model it runs as (`--model NAME`, `models/NAME.yaml`).
    pub model: &'static str,
    /// Writes per lane.
    pub lanes: Vec<Vec<Write>>,
}

impl Workload {
    /// A workload of one lane.
    fn one_lane(name: &'static str, model: &'static str, writes: Vec<Write>) -> Self {
        let lanes = vec![writes];
        Self { name, model, lanes }
    }

    pub fn changes(&self) -> usize {
        self.lanes.iter().map(Vec::len).sum()
    }

    /// Makes the writes into `table`: the lanes concurrently, each in order.
    pub async fn write(
        &self,
        client: &aws_sdk_dynamodb::Client,
        table: &str,
    ) -> anyhow::Result<()> {
        let mut tasks = Vec::new();
        for lane in &self.lanes {
            let (db, table) = (client.clone(), table.to_string());
            let lane = lane.clone();
            tasks.push(tokio::spawn(async move {
                for write in lane {
                    match write {
                        Write::Put(item) => {
                            let put = db.put_item().table_name(&table).set_item(Some(item));
                            put.send().await?;
                        }
                        Write::Delete(key) => {
                            let delete = db.delete_item().table_name(&table).set_key(Some(key));
                            delete.send().await?;
                        }
                    }
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    }
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
    let mut w = vec![Write::Put(h::org(&org, "Acme", "pro"))];
    for d in &depts {
        w.push(Write::Put(h::dept(&org, d, "Dept", &id(2))));
    }
    for round in 0..2u64 {
        for e in 0..emps as u64 {
            let emp_id = if e % 50 == 49 {
                "not-a-ulid".to_string()
            } else {
                id(1000 + e)
            };
            let d = &depts[((e + round) % 4) as usize];
            let mut emp = h::emp(&org, &emp_id, &format!("E{e}@Acme.co"), "E", d);
            if round == 1 && e % 5 == 0 {
                emp.insert("status".into(), s("inactive"));
            }
            w.push(Write::Put(emp));
            if e % 5 == 0 {
                let j = e / 5;
                let (job, posted) = (id(5000 + j), id(9000 + j));
                let status = if round == 1 && j % 2 == 0 {
                    "closed"
                } else {
                    "open"
                };
                let dept = &depts[(j % 4) as usize];
                w.push(Write::Put(h::job(
                    &org, &job, &posted, dept, "Engineer", status,
                )));
                if round == 0 {
                    let (app, submitted) = (id(20_000 + j), id(30_000 + j));
                    let emp = id(1000 + e);
                    w.push(Write::Put(h::app(&job, &app, &submitted, &emp, "applied")));
                }
            }
        }
    }
    Workload::one_lane("HR", "hr", w)
}

/// Social (`models/social.yaml`): `users` users, each following the next
/// five, two posts each (timelines fanned out through the queue), three
/// likes per post, then one follow in five deleted and one bad follow in
/// fifty.
pub fn social(users: usize) -> Workload {
    let u = |i: usize| format!("user{:04}", i % users);
    let mut w: Vec<Write> = (0..users)
        .map(|i| Write::Put(so::user_item(&u(i), "User")))
        .collect();
    for i in 0..users {
        for k in 1..=5 {
            w.push(Write::Put(so::follow_item(&u(i), &u(i + k), &at(i as u64))));
        }
    }
    let mut posts = Vec::new();
    for i in 0..users {
        for p in 0..2u64 {
            let post = id(100_000 + 2 * i as u64 + p);
            let created = at(1000 + i as u64);
            w.push(Write::Put(so::post_item(&u(i), &post, &created, "Hello")));
            posts.push((i, post));
        }
    }
    for (i, post) in &posts {
        for k in 1..=3 {
            w.push(Write::Put(so::like_item(
                post,
                &u(i + k),
                &at(2000 + *i as u64),
            )));
        }
    }
    for i in (0..users).step_by(5) {
        w.push(Write::Delete(so::follow_key(&u(i), &u(i + 1))));
    }
    for i in (0..users).step_by(50) {
        // Bad input: a user following themselves.
        w.push(Write::Put(so::follow_item(&u(i), &u(i), &at(i as u64))));
    }
    Workload::one_lane("social", "social", w)
}

/// The tracker (`models/tracker.yaml`, its history fold included): ten
/// changes per application (created, status, two stages, a stage
/// completed, notes, a bare update, archived, restored, a salary), in
/// `lanes` lanes of applications.
pub fn tracker(apps: usize, lanes: usize) -> Workload {
    let mut out: Vec<Vec<Write>> = (0..lanes.max(1)).map(|_| Vec::new()).collect();
    for a in 0..apps {
        let id = format!("app{a:05}");
        let mut app = application(&id, "Bench Co", "Engineer", "applied", &at(1));
        let mut writes = vec![app.clone()];
        let mut update = |set: Option<(&str, AttributeValue)>, t: u64| {
            if let Some((k, v)) = set {
                app.insert(k.to_string(), v);
            }
            app.insert("updatedAt".into(), s(at(t)));
            app.clone()
        };
        let mut completed = stage(&id, "s1", "Screen", 1);
        completed.insert("isCompleted".into(), AttributeValue::Bool(true));
        writes.push(update(Some(("status", s("interviewing"))), 2));
        writes.push(stage(&id, "s1", "Screen", 1));
        writes.push(stage(&id, "s2", "Onsite", 2));
        writes.push(completed);
        writes.push(update(Some(("notes", s("good call"))), 3));
        writes.push(update(None, 4));
        writes.push(update(Some(("isArchived", AttributeValue::Bool(true))), 5));
        writes.push(update(Some(("isArchived", AttributeValue::Bool(false))), 6));
        writes.push(update(Some(("salaryMin", n(100_000))), 7));
        let lane = a % out.len();
        out[lane].extend(writes.into_iter().map(Write::Put));
    }
    Workload {
        name: "tracker",
        model: "tracker",
        lanes: out,
    }
}

/// Pick'Em (`models/pickem.yaml`): 4 events of 3 matches, `users` users
/// each predicting every event, then every match's result (each result
/// starts a scoring job over its event's predictions, through the queue:
/// points computed, standings summed), and one bad prediction in fifty.
pub fn pickem(users: usize) -> Workload {
    const EVENTS: [(&str, &str); 4] = [
        ("2024-03-03", "revolution"),
        ("2024-04-06", "dynasty"),
        ("2024-05-26", "double-or-nothing"),
        ("2024-06-30", "forbidden-door"),
    ];
    let a_match = |date: &str, slug: &str, m: i64, result: Option<i64>| {
        p::a_match(
            &format!("{date}-{slug}"),
            &format!("m{m}"),
            m,
            10 * (m + 1),
            result,
        )
    };
    let mut w = Vec::new();
    for (date, slug) in EVENTS {
        w.push(Write::Put(p::event(date, slug, "Event", "upcoming")));
        for m in 0..3 {
            w.push(Write::Put(a_match(date, slug, m, None)));
        }
    }
    for u in 0..users {
        w.push(Write::Put(p::user(&format!("u{u}"))));
        for (date, slug) in EVENTS {
            let picks: Vec<(String, i64)> = (0..3)
                .map(|m| {
                    let bad = u % 50 == 49 && m == 0;
                    (format!("m{m}"), if bad { -1 } else { ((u + m) % 2) as i64 })
                })
                .collect();
            let event = format!("{date}-{slug}");
            w.push(Write::Put(p::prediction(&format!("u{u}"), &event, &picks)));
        }
    }
    for (date, slug) in EVENTS {
        for m in 0..3 {
            w.push(Write::Put(a_match(date, slug, m, Some(m % 2))));
        }
    }
    Workload::one_lane("Pick'Em", "pickem", w)
}
