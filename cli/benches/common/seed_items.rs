//! Writer items of the shipped seeds as item literals (the keys and
//! attributes `models/<seed>.yaml` declares), for the benchmarks and the
//! integration tests (which include this file by path): what an
//! application of each seed writes, built without the model's own code.

#![allow(dead_code)] // each benchmark and test uses part of it

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
