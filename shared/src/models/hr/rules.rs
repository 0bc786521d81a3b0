//! What the HR SaaS derives (SPEC §5.2), in the engine's vocabulary:
//!
//! - Employee: GSI1 `EMAIL#<email lower-cased>` / `EMP#<empId>`; the
//!   DeptEmployee item `DEPT#<deptId>` / `EMP#<empId>`; +1 `headcount` on
//!   its Department while active (a writer-owned counter: never created,
//!   sums wait in the ledger until the department exists);
//! - JobPosting: GSI1 `ORG#<orgId>#OPEN` / `JOB#<postedAt>#<jobId>` only
//!   while open (sparse: both absent otherwise); the job lookup item
//!   `JOB#<jobId>` / `#META`;
//! - Application: GSI1 `EMP#<empId>` / `APP#<submittedAt>#<appId>`;
//! - Department: a counter item (recognised from its key alone).
//!
//! Every aspect parses the whole item with [`Entity::parse`], so bad input
//! changes nothing and blocks nothing.

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::{is_ulid, Emp, EmpStatus, Entity, Job, JobStatus};
use super::keys::{self, types, Kind};
use crate::engine::rules::{Contribution, Counter, Projection, Rules};
use crate::error::InputError;
use crate::item::{s, Item, ItemExt};

/// The HR SaaS's derive rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct HrRules;

/// The headcount counter of the Department `ORG#<orgId>` / `DEPT#<deptId>`:
/// writer-owned (never created by the processor).
pub fn headcount_counter(org_id: &str, dept_id: &str) -> Counter {
    Counter {
        key: vec![
            (keys::PK, keys::org_pk(org_id)),
            (keys::SK, keys::dept_key(dept_id)),
        ],
        attrs: &[keys::HEADCOUNT],
        create: None,
        remove_at_zero: false,
    }
}

fn gsi1(pk: Option<String>, sk: Option<String>, sources: Vec<&'static str>) -> Projection {
    Projection {
        attrs: vec![(keys::GSI1PK, pk.map(s)), (keys::GSI1SK, sk.map(s))],
        sources,
    }
}

/// The DeptEmployee item of an employee.
pub fn dept_employee(emp: &Emp) -> Item {
    [
        (keys::PK, s(keys::dept_key(emp.department_id.as_str()))),
        (keys::SK, s(keys::emp_key(emp.emp_id.as_str()))),
        ("orgId", s(emp.org_id.as_str())),
        (keys::TYPE, s(types::DEPT_EMP)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The job lookup item of a posting (AP9 option b).
pub fn job_lookup(job: &Job) -> Item {
    [
        (keys::PK, s(keys::job_pk(job.job_id.as_str()))),
        (keys::SK, s(keys::META_SK)),
        ("orgId", s(job.org_id.as_str())),
        ("postedAt", s(job.posted_at.as_str())),
        (keys::TYPE, s(types::JOB_LOOKUP)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Rules for HrRules {
    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError> {
        Ok(match Entity::parse(image)? {
            Entity::Emp(e) => Some(gsi1(
                Some(keys::email_gsi1pk(&e.email)),
                Some(keys::emp_key(e.emp_id.as_str())),
                vec!["email", "empId"],
            )),
            Entity::Job(j) => {
                let open = j.status == JobStatus::Open;
                Some(gsi1(
                    open.then(|| keys::open_jobs_gsi1pk(j.org_id.as_str())),
                    open.then(|| j.sk()),
                    vec!["status", "orgId", "postedAt", "jobId"],
                ))
            }
            Entity::App(a) => Some(gsi1(
                Some(keys::emp_key(a.emp_id.as_str())),
                Some(a.sk()),
                vec!["empId", "submittedAt", "appId"],
            )),
            Entity::Org(_) | Entity::Dept(_) | Entity::Processor(_) => None,
        })
    }

    fn derived(&self, image: &Item) -> Result<Vec<Item>, InputError> {
        Ok(match Entity::parse(image)? {
            Entity::Emp(e) => vec![dept_employee(&e)],
            Entity::Job(j) => vec![job_lookup(&j)],
            _ => vec![],
        })
    }

    fn contributions(&self, image: &Item) -> Result<Vec<Contribution>, InputError> {
        Ok(match Entity::parse(image)? {
            Entity::Emp(e) if e.status == EmpStatus::Active => vec![Contribution {
                counter: headcount_counter(e.org_id.as_str(), e.department_id.as_str()),
                values: vec![(keys::HEADCOUNT, 1)],
            }],
            _ => vec![],
        })
    }

    /// A Department key (ids that are ULIDs) is a headcount counter; works
    /// from the key attributes alone.
    fn counter(&self, image: &Item) -> Option<Counter> {
        let pk = image.s(keys::PK).ok()?;
        let sk = image.s(keys::SK).ok()?;
        if keys::kind(pk, sk)? != Kind::Dept {
            return None;
        }
        let (org, dept) = keys::split_dept_key(pk, sk)?;
        (is_ulid(org) && is_ulid(dept)).then(|| headcount_counter(org, dept))
    }

    /// A job lookup is implied by every posting of its job id: two while a
    /// writer re-dates a posting (puts the new key, then deletes the old).
    fn shared(&self, derived_key: &Item) -> bool {
        let (Ok(pk), Ok(sk)) = (derived_key.s(keys::PK), derived_key.s(keys::SK)) else {
            return false;
        };
        keys::kind(pk, sk) == Some(Kind::JobLookup)
    }

    fn is_derived(&self, key: &Item) -> bool {
        self.ignores(key)
    }

    /// DeptEmployee and job lookup items are the processor's and imply
    /// nothing: their records need no read.
    fn ignores(&self, keys: &Item) -> bool {
        let (Ok(pk), Ok(sk)) = (keys.s(keys::PK), keys.s(keys::SK)) else {
            return false;
        };
        keys::kind(pk, sk).is_some_and(Kind::processor_owned)
    }
}

/// The `headcount` a Department item carries, if it is a number.
pub fn headcount_of(item: &Item) -> Option<i64> {
    match item.get(keys::HEADCOUNT) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::derive::projection_update;
    use crate::item::n;
    use crate::models::hr::entities::build::{app, dept, emp, job, org};
    use crate::models::hr::entities::tests::{A, D, E, J, O, T};

    const D2: &str = "01HXAC0000000000000000000C";

    fn key(pk: &str, sk: &str) -> Item {
        [("PK".to_string(), s(pk)), ("SK".to_string(), s(sk))].into()
    }

    fn apply(mut item: Item, p: &Projection) -> Item {
        for (a, v) in &p.attrs {
            match v {
                Some(v) => {
                    item.insert(a.to_string(), v.clone());
                }
                None => {
                    item.remove(*a);
                }
            }
        }
        item
    }

    #[test]
    fn employee_projection_is_the_email_index() {
        let e = emp(O, E, "Alice.Ünal@Acme.CO", "Alice", D);
        let p = HrRules.projection(&e).unwrap().unwrap();
        assert_eq!(
            p.attrs,
            vec![
                ("GSI1PK", Some(s("EMAIL#alice.ünal@acme.co"))),
                ("GSI1SK", Some(s(format!("EMP#{E}")))),
            ]
        );
        assert_eq!(p.sources, vec!["email", "empId"]);
        let projected = apply(e, &p);
        assert!(projection_update(&["PK", "SK"], &projected, &p).is_none());
    }

    #[test]
    fn employee_implies_exactly_its_dept_employee_item() {
        let d = HrRules.derived(&emp(O, E, "a@b.c", "A", D)).unwrap();
        assert_eq!(d.len(), 1);
        let de = &d[0];
        assert_eq!(de.len(), 4, "PK, SK, orgId, type");
        assert_eq!(de["PK"], s(format!("DEPT#{D}")));
        assert_eq!(de["SK"], s(format!("EMP#{E}")));
        assert_eq!(de["orgId"], s(O));
        assert_eq!(de["type"], s("dept_emp"));
        // Moving: the new department's item, and only it.
        let moved = HrRules.derived(&emp(O, E, "a@b.c", "A", D2)).unwrap();
        assert_eq!(moved[0]["PK"], s(format!("DEPT#{D2}")));
        // Inactive employees stay on the roster (AP7 lists them).
        let mut inactive = emp(O, E, "a@b.c", "A", D);
        inactive.insert("status".into(), s("inactive"));
        assert_eq!(HrRules.derived(&inactive).unwrap(), d);
    }

    #[test]
    fn only_active_employees_count_in_their_department() {
        let c = HrRules.contributions(&emp(O, E, "a@b.c", "A", D)).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].values, vec![("headcount", 1)]);
        let counter = &c[0].counter;
        assert_eq!(
            counter.key,
            vec![("PK", format!("ORG#{O}")), ("SK", format!("DEPT#{D}"))]
        );
        assert_eq!(counter.attrs, &["headcount"]);
        assert_eq!(counter.create, None, "never creates a department");
        assert!(!counter.remove_at_zero);
        let mut inactive = emp(O, E, "a@b.c", "A", D);
        inactive.insert("status".into(), s("inactive"));
        inactive.insert("terminatedAt".into(), s("2026-02-01"));
        assert!(HrRules.contributions(&inactive).unwrap().is_empty());
        for other in [
            org(O, "Acme", "pro"),
            dept(O, D, "Eng", E),
            job(O, J, T, D, "x", "open"),
            app(J, A, T, E, "applied"),
        ] {
            assert!(HrRules.contributions(&other).unwrap().is_empty());
        }
    }

    #[test]
    fn department_is_a_counter_from_its_key_alone() {
        let c = HrRules
            .counter(&key(&format!("ORG#{O}"), &format!("DEPT#{D}")))
            .unwrap();
        assert_eq!(c, headcount_counter(O, D));
        assert_eq!(c.key_item(), key(&format!("ORG#{O}"), &format!("DEPT#{D}")));
        // The full item, even a writer's put carrying a wrong headcount.
        let mut d = dept(O, D, "Eng", E);
        d.insert("headcount".into(), n(99));
        assert_eq!(HrRules.counter(&d), Some(c));
        assert_eq!(HrRules.counter(&key(&format!("ORG#{O}"), "DEPT#eng")), None);
        assert_eq!(
            HrRules.counter(&key(&format!("ORG#{O}"), &format!("EMP#{E}"))),
            None
        );
        assert_eq!(
            HrRules.counter(&key(&format!("DEPT#{D}"), &format!("EMP#{E}"))),
            None
        );
        // A department carries no projection (headcount is the counter's).
        assert_eq!(HrRules.projection(&d).unwrap(), None);
        assert!(HrRules.derived(&d).unwrap().is_empty());
    }

    #[test]
    fn open_postings_are_in_the_sparse_index_only_while_open() {
        let open = job(O, J, T, D, "Engineer", "open");
        let p = HrRules.projection(&open).unwrap().unwrap();
        assert_eq!(
            p.attrs,
            vec![
                ("GSI1PK", Some(s(format!("ORG#{O}#OPEN")))),
                ("GSI1SK", Some(s(format!("JOB#{T}#{J}")))),
            ]
        );
        assert_eq!(p.sources, vec!["status", "orgId", "postedAt", "jobId"]);
        let indexed = apply(open, &p);
        for status in ["closed", "draft"] {
            let mut closed = indexed.clone();
            closed.insert("status".into(), s(status));
            let p = HrRules.projection(&closed).unwrap().unwrap();
            assert_eq!(p.attrs, vec![("GSI1PK", None), ("GSI1SK", None)]);
            let u = projection_update(&["PK", "SK"], &closed, &p).unwrap();
            assert_eq!(u.update_expression, "REMOVE #p0, #p1");
            assert!(projection_update(&["PK", "SK"], &apply(closed, &p), &p).is_none());
        }
    }

    #[test]
    fn posting_implies_its_lookup_item() {
        for status in ["draft", "open", "closed"] {
            let d = HrRules
                .derived(&job(O, J, T, D, "Engineer", status))
                .unwrap();
            assert_eq!(d.len(), 1);
            let l = &d[0];
            assert_eq!(l.len(), 5, "PK, SK, orgId, postedAt, type");
            assert_eq!(l["PK"], s(format!("JOB#{J}")));
            assert_eq!(l["SK"], s("#META"));
            assert_eq!(l["orgId"], s(O));
            assert_eq!(l["postedAt"], s(T));
            assert_eq!(l["type"], s("job_lookup"));
        }
    }

    #[test]
    fn applications_are_indexed_by_employee() {
        let a = app(J, A, T, E, "applied");
        let p = HrRules.projection(&a).unwrap().unwrap();
        assert_eq!(
            p.attrs,
            vec![
                ("GSI1PK", Some(s(format!("EMP#{E}")))),
                ("GSI1SK", Some(s(format!("APP#{T}#{A}")))),
            ]
        );
        assert!(HrRules.derived(&a).unwrap().is_empty());
    }

    #[test]
    fn organisation_implies_nothing_but_is_validated() {
        assert_eq!(HrRules.projection(&org(O, "Acme", "pro")).unwrap(), None);
        assert!(HrRules.projection(&org(O, "Acme", "gold")).is_err());
    }

    #[test]
    fn writer_values_of_processor_attributes_are_brought_back() {
        let mut e = emp(O, E, "Bob@acme.co", "Bob", D);
        e.insert("GSI1PK".into(), s("EMAIL#Bob@acme.co"));
        e.insert("GSI1SK".into(), s("junk"));
        let p = HrRules.projection(&e).unwrap().unwrap();
        let u = projection_update(&["PK", "SK"], &e, &p).unwrap();
        assert_eq!(u.update_expression, "SET #p0 = :p0, #p1 = :p1");
        assert_eq!(
            u.condition_expression.as_deref(),
            Some("attribute_exists(#k0) AND #s0 = :s0 AND #s1 = :s1")
        );
    }

    #[test]
    fn bad_input_fails_every_aspect() {
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("status".into(), s("on-leave"));
        assert!(HrRules.projection(&e).is_err());
        assert!(HrRules.derived(&e).is_err());
        assert!(HrRules.contributions(&e).is_err());
        let mut j = job(O, J, T, D, "x", "open");
        j.insert("jobId".into(), s("job-1"));
        assert!(HrRules.projection(&j).is_err());
        assert!(HrRules.derived(&j).is_err());
    }

    #[test]
    fn processor_items_are_ignored_without_a_read() {
        assert!(HrRules.ignores(&key(&format!("DEPT#{D}"), &format!("EMP#{E}"))));
        assert!(HrRules.ignores(&key(&format!("JOB#{J}"), "#META")));
        assert!(!HrRules.ignores(&key(&format!("JOB#{J}"), &format!("APP#{T}#{A}"))));
        assert!(!HrRules.ignores(&key(&format!("ORG#{O}"), &format!("EMP#{E}"))));
        assert!(!HrRules.ignores(&key("X", "Y")));
        let de = HrRules.derived(&emp(O, E, "a@b.c", "A", D)).unwrap();
        assert_eq!(HrRules.projection(&de[0]).unwrap(), None);
        assert!(HrRules.derived(&de[0]).unwrap().is_empty());
        assert!(HrRules.contributions(&de[0]).unwrap().is_empty());
    }

    #[test]
    fn headcount_reads_numbers_only() {
        let mut d = dept(O, D, "Eng", E);
        assert_eq!(headcount_of(&d), None);
        d.insert("headcount".into(), n(3));
        assert_eq!(headcount_of(&d), Some(3));
    }
}
