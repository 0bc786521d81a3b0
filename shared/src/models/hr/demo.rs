//! `jobstream demo --model hr`: an organisation with departments, employees
//! moving and leaving (one hired before their department exists), postings
//! opened and closed, applications; writers use plain puts and deletes only.
//! Prints the seed's twelve access patterns as tables (AP8 before and after
//! a close, the seed's recommended sparse-index test) and compares each with
//! what the written facts imply, computed here independently of the rules.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::build;
use super::keys::{self, types};
use crate::engine::setjob::BoxFut;
use crate::item::{n, s, Item, ItemExt};
use crate::models::{BoxError, Harness};
use crate::report::render_table;

/// 2026-01-05T08:00:00Z: ids are ULIDs minted from this hour on.
const EPOCH_MS: u64 = 1_767_600_000_000;
const DAY_MS: u64 = 24 * 3600 * 1000;

/// A ULID `days` days (plus `n` ms) after the epoch.
fn id(days: u64, n: u64) -> String {
    build::ulid(EPOCH_MS + days * DAY_MS + n, u128::from(n) + 1)
}

fn day(days: u64) -> String {
    let ms = i64::try_from(EPOCH_MS + days * DAY_MS).unwrap_or_default();
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// The scenario's ids.
struct Ids {
    org: String,
    eng: String,
    people: String,
    design: String,
    alice: String,
    bob: String,
    carol: String,
    dave: String,
    erin: String,
    frank: String,
    emile: String,
    alex: String,
    gina: String,
    senior: String,
    coordinator: String,
    designer: String,
}

impl Ids {
    fn new() -> Self {
        Self {
            org: id(0, 1),
            eng: id(0, 2),
            people: id(0, 3),
            design: id(30, 4),
            alice: id(1, 10),
            bob: id(2, 11),
            carol: id(3, 12),
            dave: id(4, 13),
            erin: id(5, 14),
            frank: id(6, 15),
            emile: id(7, 16),
            alex: id(8, 17),
            gina: id(40, 18),
            senior: id(20, 30),
            coordinator: id(21, 31),
            designer: id(22, 32),
        }
    }
}

/// The writer's view: every item it wrote, as it wrote it (deleted items
/// removed). The expected access patterns are computed from this.
#[derive(Default)]
struct Facts(BTreeMap<(String, String), Item>);

impl Facts {
    fn key(item: &Item) -> (String, String) {
        let k = |a| item.s(a).unwrap_or_default().to_string();
        (k(keys::PK), k(keys::SK))
    }

    fn of_type(&self, t: &str) -> Vec<&Item> {
        self.0
            .values()
            .filter(|i| i.s(keys::TYPE).ok() == Some(t))
            .collect()
    }
}

/// The application's client: plain puts and deletes, reads.
struct Writer {
    client: aws_sdk_dynamodb::Client,
    table: String,
    facts: Facts,
    writes: usize,
}

impl Writer {
    async fn put(&mut self, item: Item) -> Result<(), BoxError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item.clone()))
            .send()
            .await?;
        self.facts.0.insert(Facts::key(&item), item);
        self.writes += 1;
        Ok(())
    }

    async fn delete(&mut self, pk: &str, sk: &str) -> Result<(), BoxError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(keys::PK, s(pk))
            .key(keys::SK, s(sk))
            .send()
            .await?;
        self.facts.0.remove(&(pk.to_string(), sk.to_string()));
        self.writes += 1;
        Ok(())
    }

    /// The writer's current copy of an item (to upsert a changed copy).
    fn current(&self, pk: &str, sk: &str) -> Item {
        self.facts
            .0
            .get(&(pk.to_string(), sk.to_string()))
            .cloned()
            .unwrap_or_default()
    }
}

#[allow(clippy::too_many_arguments)]
fn employee(
    ids: &Ids,
    emp: &str,
    email: &str,
    first: &str,
    last: &str,
    dept: &str,
    role: &str,
    hired_day: u64,
) -> Item {
    let mut e = build::emp(&ids.org, emp, email, first, dept);
    e.insert("lastName".into(), s(last));
    e.insert("role".into(), s(role));
    e.insert("hiredAt".into(), s(day(hired_day)));
    e
}

/// Runs the demo through `h`; returns the differences (empty = exact).
pub fn run(h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(async move {
        let ids = Ids::new();
        let mut w = Writer {
            client: h.dynamodb().clone(),
            table: h.table().to_string(),
            facts: Facts::default(),
            writes: 0,
        };
        let mut diffs = Vec::new();

        println!("== 1. Acme: two departments, employees (Carol before her department), postings, applications");
        w.put(build::org(&ids.org, "Acme Corp", "pro")).await?;
        w.put(build::dept(&ids.org, &ids.eng, "Engineering", &ids.alice))
            .await?;
        w.put(build::dept(&ids.org, &ids.people, "People Ops", &ids.bob))
            .await?;
        let staff = [
            (
                &ids.alice,
                "Alice@Acme.co",
                "Alice",
                "Archer",
                &ids.eng,
                "admin",
                1,
            ),
            (
                &ids.bob,
                "bob@acme.co",
                "Bob",
                "Baker",
                &ids.people,
                "manager",
                2,
            ),
            // Design does not exist yet: counted when it appears.
            (
                &ids.carol,
                "carol@acme.co",
                "Carol",
                "Cho",
                &ids.design,
                "employee",
                3,
            ),
            (
                &ids.dave,
                "dave@acme.co",
                "Dave",
                "Diaz",
                &ids.eng,
                "employee",
                4,
            ),
            (
                &ids.erin,
                "erin@acme.co",
                "Erin",
                "Eze",
                &ids.eng,
                "employee",
                5,
            ),
            (
                &ids.frank,
                "frank@acme.co",
                "Frank",
                "Fox",
                &ids.people,
                "employee",
                6,
            ),
            // Upper-case non-ASCII: the key is lower-cased with Unicode rules.
            (
                &ids.emile,
                "ÉMILE@Acme.co",
                "Émile",
                "Éluard",
                &ids.eng,
                "employee",
                7,
            ),
            // Shares Alice's email (AP4 returns both).
            (
                &ids.alex,
                "ALICE@acme.co",
                "Alex",
                "Archer",
                &ids.people,
                "employee",
                8,
            ),
        ];
        for (emp, email, first, last, dept, role, hired) in staff {
            let e = employee(&ids, emp, email, first, last, dept, role, hired);
            w.put(e).await?;
        }
        let jobs = [
            (&ids.senior, 20, &ids.eng, "Senior Engineer", "open"),
            (&ids.coordinator, 21, &ids.people, "HR Coordinator", "open"),
            (&ids.designer, 22, &ids.design, "Product Designer", "draft"),
        ];
        for (job, posted, dept, title, status) in jobs {
            let posted_at = id(posted, 0);
            w.put(build::job(&ids.org, job, &posted_at, dept, title, status))
                .await?;
        }
        let apps = [
            (&ids.coordinator, 23, &ids.alice, "applied"),
            (&ids.senior, 24, &ids.dave, "reviewing"),
            (&ids.coordinator, 25, &ids.dave, "reviewing"),
            (&ids.senior, 26, &ids.carol, "applied"),
        ];
        for (i, (job, submitted, emp, status)) in apps.into_iter().enumerate() {
            let app_id = id(submitted, 50 + i as u64);
            let at = id(submitted, 0);
            w.put(build::app(job, &app_id, &at, emp, status)).await?;
        }
        h.drain().await?;
        diffs.extend(check(&w, &ids, &[8, 5, 7]).await?);

        println!("== 2. Dave moves to People Ops, Erin leaves, Frank is deleted, Gina is hired,");
        println!(
            "      Design appears, a stale Engineering put (headcount 12), Senior Engineer closes,"
        );
        println!("      Product Designer opens, Dave's People Ops application is accepted");
        let mut dave = w.current(&keys::org_pk(&ids.org), &keys::emp_key(&ids.dave));
        dave.insert("departmentId".into(), s(&ids.people));
        w.put(dave).await?;
        let mut erin = w.current(&keys::org_pk(&ids.org), &keys::emp_key(&ids.erin));
        erin.insert("status".into(), s("inactive"));
        erin.insert("terminatedAt".into(), s(day(35)));
        w.put(erin).await?;
        w.delete(&keys::org_pk(&ids.org), &keys::emp_key(&ids.frank))
            .await?;
        let gina = employee(
            &ids,
            &ids.gina,
            "gina@acme.co",
            "Gina",
            "Gray",
            &ids.design,
            "employee",
            40,
        );
        w.put(gina).await?;
        w.put(build::dept(&ids.org, &ids.design, "Design", &ids.carol))
            .await?;
        let mut stale = build::dept(&ids.org, &ids.eng, "Engineering", &ids.alice);
        stale.insert(keys::HEADCOUNT.into(), n(12));
        w.put(stale).await?;
        let senior_sk = keys::job_sk(&id(20, 0), &ids.senior);
        let mut senior = w.current(&keys::org_pk(&ids.org), &senior_sk);
        senior.insert("status".into(), s("closed"));
        senior.insert("closedAt".into(), s(day(41)));
        w.put(senior).await?;
        let designer_sk = keys::job_sk(&id(22, 0), &ids.designer);
        let mut designer = w.current(&keys::org_pk(&ids.org), &designer_sk);
        designer.insert("status".into(), s("open"));
        w.put(designer).await?;
        let accepted_sk = keys::app_sk(&id(25, 0), &id(25, 52));
        let mut accepted = w.current(&keys::job_pk(&ids.coordinator), &accepted_sk);
        accepted.insert("status".into(), s("accepted"));
        w.put(accepted).await?;
        h.drain().await?;
        diffs.extend(check(&w, &ids, &(1..=12).collect::<Vec<_>>()).await?);

        let problems = h.verify().await?;
        for p in &problems {
            println!("verify: {p}");
        }
        diffs.extend(problems.into_iter().map(|p| format!("verify: {p}")));
        println!(
            "{} writer writes, {} processor item writes",
            w.writes,
            h.processor_writes()
        );
        if diffs.is_empty() {
            println!("every access pattern is exactly what the facts imply; verify finds nothing");
        } else {
            for d in &diffs {
                println!("DIFFERENCE: {d}");
            }
        }
        Ok(diffs)
    })
}

/// One access pattern: its rows as read and as the facts imply.
struct Pattern {
    title: String,
    headers: Vec<&'static str>,
    got: Vec<Vec<String>>,
    want: Vec<Vec<String>>,
}

fn cell(item: &Item, attr: &str) -> String {
    match item.get(attr) {
        Some(AttributeValue::S(v)) => v.clone(),
        Some(AttributeValue::N(v)) => v.clone(),
        Some(AttributeValue::Bool(b)) => b.to_string(),
        Some(_) => "?".to_string(),
        None => "-".to_string(),
    }
}

fn rows(items: &[&Item], attrs: &[&str]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|i| attrs.iter().map(|a| cell(i, a)).collect())
        .collect()
}

/// Sorted by sort key, newest first when `desc`.
fn sorted(mut items: Vec<&Item>, desc: bool) -> Vec<&Item> {
    items.sort_by(|a, b| Facts::key(a).1.cmp(&Facts::key(b).1));
    if desc {
        items.reverse();
    }
    items
}

async fn get(h: &Writer, pk: &str, sk: &str) -> Result<Option<Item>, BoxError> {
    let out = h
        .client
        .get_item()
        .table_name(&h.table)
        .key(keys::PK, s(pk))
        .key(keys::SK, s(sk))
        .consistent_read(true)
        .send()
        .await?;
    Ok(out.item)
}

/// A key-condition query: partition `pk`, sort key beginning with
/// `prefix`, on the table or on GSI1.
async fn query(
    h: &Writer,
    gsi1: bool,
    pk: &str,
    prefix: &str,
    desc: bool,
) -> Result<Vec<Item>, BoxError> {
    let (pk_attr, sk_attr) = if gsi1 {
        (keys::GSI1PK, keys::GSI1SK)
    } else {
        (keys::PK, keys::SK)
    };
    let mut out = Vec::new();
    let mut start = None;
    loop {
        let mut q = h
            .client
            .query()
            .table_name(&h.table)
            .key_condition_expression("#p = :p AND begins_with(#s, :s)")
            .expression_attribute_names("#p", pk_attr)
            .expression_attribute_names("#s", sk_attr)
            .expression_attribute_values(":p", s(pk))
            .expression_attribute_values(":s", s(prefix))
            .scan_index_forward(!desc)
            .set_exclusive_start_key(start);
        q = if gsi1 {
            q.index_name(keys::GSI1)
        } else {
            q.consistent_read(true)
        };
        let page = q.send().await?;
        out.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(out);
        }
    }
}

/// The access patterns `which` (numbers 1..=12), read and expected.
async fn patterns(w: &Writer, ids: &Ids, which: &[u8]) -> Result<Vec<Pattern>, BoxError> {
    let h = w;
    let f = &w.facts;
    let org_pk = keys::org_pk(&ids.org);
    let employees = f.of_type(types::EMP);
    let active_in = |dept: &str| {
        employees
            .iter()
            .filter(|e| {
                e.s("departmentId").ok() == Some(dept) && e.s("status").ok() == Some("active")
            })
            .count()
            .to_string()
    };
    let with_headcount = |d: &Item| {
        let mut d = d.clone();
        d.insert(
            keys::HEADCOUNT.into(),
            s(active_in(d.s("deptId").unwrap_or_default())),
        );
        d
    };
    let mut out = Vec::new();
    for ap in which {
        let p = match ap {
            1 => {
                let attrs = ["orgId", "name", "plan", "status"];
                let got = get(h, &org_pk, keys::METADATA_SK).await?;
                let want = f.0.get(&(org_pk.clone(), keys::METADATA_SK.to_string()));
                Pattern {
                    title: "AP1 organisation by id (GetItem ORG#<orgId> / #METADATA)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.into_iter().collect::<Vec<_>>(), &attrs),
                }
            }
            2 => {
                let attrs = [
                    "empId",
                    "email",
                    "firstName",
                    "departmentId",
                    "role",
                    "status",
                ];
                let sk = keys::emp_key(&ids.alice);
                let got = get(h, &org_pk, &sk).await?;
                let want = f.0.get(&(org_pk.clone(), sk));
                Pattern {
                    title: "AP2 employee by id: Alice (GetItem ORG#<orgId> / EMP#<empId>)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.into_iter().collect::<Vec<_>>(), &attrs),
                }
            }
            3 => {
                let attrs = [
                    "empId",
                    "firstName",
                    "lastName",
                    "hiredAt",
                    "departmentId",
                    "status",
                ];
                let got = query(h, false, &org_pk, keys::EMP_PREFIX, true).await?;
                Pattern {
                    title: "AP3 employees of the org, latest hire first (Query ORG#<orgId>, EMP#, desc)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&sorted(employees.clone(), true), &attrs),
                }
            }
            4 => {
                let attrs = ["GSI1PK", "empId", "firstName", "email"];
                let mut got = Vec::new();
                let mut want = Vec::new();
                for email in ["alice@acme.co", "émile@acme.co"] {
                    let pk = keys::email_gsi1pk(email);
                    got.extend(query(h, true, &pk, keys::EMP_PREFIX, false).await?);
                    let mut matching: Vec<Item> = employees
                        .iter()
                        .filter(|e| {
                            keys::normalize_email(e.s("email").unwrap_or_default()) == email
                        })
                        .map(|e| {
                            let mut e = (*e).clone();
                            e.insert(keys::GSI1PK.into(), s(&pk));
                            e
                        })
                        .collect();
                    matching.sort_by_key(|e| cell(e, "empId"));
                    want.extend(matching);
                }
                Pattern {
                    title: "AP4 employees by email alice@acme.co, émile@acme.co (Query GSI1 EMAIL#<email>)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.iter().collect::<Vec<_>>(), &attrs),
                }
            }
            5 => {
                let attrs = ["deptId", "name", "managerId", "headcount"];
                let got = query(h, false, &org_pk, keys::DEPT_PREFIX, false).await?;
                let want: Vec<Item> = sorted(f.of_type(types::DEPT), false)
                    .into_iter()
                    .map(with_headcount)
                    .collect();
                Pattern {
                    title: "AP5 departments of the org, with headcount (Query ORG#<orgId>, DEPT#)"
                        .into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.iter().collect::<Vec<_>>(), &attrs),
                }
            }
            6 => {
                let attrs = ["deptId", "name", "managerId", "headcount"];
                let sk = keys::dept_key(&ids.design);
                let got = get(h, &org_pk, &sk).await?;
                let want = f.0.get(&(org_pk.clone(), sk)).map(with_headcount);
                Pattern {
                    title: "AP6 department by id: Design (GetItem ORG#<orgId> / DEPT#<deptId>)"
                        .into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.iter().collect::<Vec<_>>(), &attrs),
                }
            }
            7 => {
                let attrs = ["PK", "SK", "orgId", "type"];
                let mut got = Vec::new();
                let mut want = Vec::new();
                for dept in [&ids.eng, &ids.people, &ids.design] {
                    got.extend(
                        query(h, false, &keys::dept_key(dept), keys::EMP_PREFIX, false).await?,
                    );
                    let mut members: Vec<Item> = employees
                        .iter()
                        .filter(|e| e.s("departmentId").ok() == Some(dept.as_str()))
                        .map(|e| {
                            [
                                (keys::PK, s(keys::dept_key(dept))),
                                (keys::SK, s(keys::emp_key(e.s("empId").unwrap_or_default()))),
                                ("orgId", s(&ids.org)),
                                (keys::TYPE, s(types::DEPT_EMP)),
                            ]
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect()
                        })
                        .collect();
                    members.sort_by_key(|m| cell(m, keys::SK));
                    want.extend(members);
                }
                Pattern {
                    title: "AP7 employees of each department: Engineering, People Ops, Design (Query DEPT#<deptId>, EMP#)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.iter().collect::<Vec<_>>(), &attrs),
                }
            }
            8 => {
                let attrs = ["jobId", "title", "status", "postedAt"];
                let got = query(
                    h,
                    true,
                    &keys::open_jobs_gsi1pk(&ids.org),
                    keys::JOB_PREFIX,
                    true,
                )
                .await?;
                let open: Vec<&Item> = f
                    .of_type(types::JOB)
                    .into_iter()
                    .filter(|j| j.s("status").ok() == Some("open"))
                    .collect();
                Pattern {
                    title: "AP8 open postings of the org, newest first (Query GSI1 ORG#<orgId>#OPEN, desc; sparse)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&sorted(open, true), &attrs),
                }
            }
            9 => {
                let attrs = ["jobId", "orgId", "postedAt", "title", "status"];
                let mut got = Vec::new();
                let mut want = Vec::new();
                for job in [&ids.senior, &ids.coordinator, &ids.designer] {
                    // Step 1: the lookup item; step 2: the posting.
                    if let Some(l) = get(h, &keys::job_pk(job), keys::META_SK).await? {
                        let sk = keys::job_sk(&cell(&l, "postedAt"), job);
                        got.extend(get(h, &keys::org_pk(&cell(&l, "orgId")), &sk).await?);
                    }
                    want.extend(
                        f.of_type(types::JOB)
                            .into_iter()
                            .filter(|j| j.s("jobId").ok() == Some(job.as_str()))
                            .cloned(),
                    );
                }
                Pattern {
                    title:
                        "AP9 postings by id alone (GetItem JOB#<jobId> / #META, then the posting)"
                            .into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&want.iter().collect::<Vec<_>>(), &attrs),
                }
            }
            10 => {
                let attrs = ["appId", "empId", "status", "submittedAt"];
                let pk = keys::job_pk(&ids.coordinator);
                let got = query(h, false, &pk, keys::APP_PREFIX, true).await?;
                let want: Vec<&Item> = f
                    .of_type(types::APP)
                    .into_iter()
                    .filter(|a| a.s(keys::PK).ok() == Some(pk.as_str()))
                    .collect();
                Pattern {
                    title: "AP10 applications for HR Coordinator, newest first (Query JOB#<jobId>, APP#, desc)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&sorted(want, true), &attrs),
                }
            }
            11 => {
                let attrs = ["appId", "jobId", "status", "submittedAt"];
                let got = query(h, true, &keys::emp_key(&ids.dave), keys::APP_PREFIX, true).await?;
                let want: Vec<&Item> = f
                    .of_type(types::APP)
                    .into_iter()
                    .filter(|a| a.s("empId").ok() == Some(ids.dave.as_str()))
                    .collect();
                Pattern {
                    title: "AP11 applications by Dave, newest first (Query GSI1 EMP#<empId>, APP#, desc)".into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&sorted(want, true), &attrs),
                }
            }
            _ => {
                let attrs = ["jobId", "title", "status", "postedAt", "closedAt"];
                let got = query(h, false, &org_pk, keys::JOB_PREFIX, true).await?;
                Pattern {
                    title:
                        "AP12 all postings of the org, newest first (Query ORG#<orgId>, JOB#, desc)"
                            .into(),
                    headers: attrs.to_vec(),
                    got: rows(&got.iter().collect::<Vec<_>>(), &attrs),
                    want: rows(&sorted(f.of_type(types::JOB), true), &attrs),
                }
            }
        };
        out.push(p);
    }
    Ok(out)
}

/// Prints the access patterns `which` and returns their differences.
async fn check(w: &Writer, ids: &Ids, which: &[u8]) -> Result<Vec<String>, BoxError> {
    let mut diffs = Vec::new();
    for p in patterns(w, ids, which).await? {
        println!("\n{}\n{}", p.title, render_table(&p.headers, &p.got));
        if p.got.is_empty() {
            println!("(no items)");
        }
        if p.got != p.want {
            println!("expected:\n{}", render_table(&p.headers, &p.want));
            diffs.push(format!(
                "{}: read {:?}, the facts imply {:?}",
                p.title, p.got, p.want
            ));
        }
    }
    println!();
    Ok(diffs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::hr::entities::{is_ulid, Entity};

    #[test]
    fn scenario_ids_are_ulids_in_time_order() {
        let ids = Ids::new();
        for i in [&ids.org, &ids.alice, &ids.gina, &ids.designer] {
            assert!(is_ulid(i));
        }
        assert!(ids.alice < ids.bob && ids.bob < ids.gina);
        assert_eq!(day(0), "2026-01-05");
        let e = employee(&ids, &ids.alice, "A@x.io", "A", "B", &ids.eng, "admin", 1);
        assert!(matches!(Entity::parse(&e), Ok(Entity::Emp(_))));
    }
}
