//! Every key format of the HR SaaS (seed 003, SPEC §5.2), in one place.
//!
//! Ids are ULIDs (validated by [`super::entities`]), so they never contain
//! `#` and every key below splits back into its parts unambiguously.

pub const TABLE: &str = "acme-hr";
pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
pub const GSI1PK: &str = "GSI1PK";
pub const GSI1SK: &str = "GSI1SK";
/// The entity type attribute.
pub const TYPE: &str = "type";
/// The processor-owned count on a Department item.
pub const HEADCOUNT: &str = "headcount";

/// Entity type values (`type`): writers' and the processor's.
pub mod types {
    pub const ORG: &str = "org";
    pub const DEPT: &str = "dept";
    pub const EMP: &str = "emp";
    pub const JOB: &str = "job";
    pub const APP: &str = "app";
    pub const DEPT_EMP: &str = "dept_emp";
    pub const JOB_LOOKUP: &str = "job_lookup";
}

pub const ORG_PREFIX: &str = "ORG#";
pub const DEPT_PREFIX: &str = "DEPT#";
pub const EMP_PREFIX: &str = "EMP#";
pub const JOB_PREFIX: &str = "JOB#";
pub const APP_PREFIX: &str = "APP#";
pub const EMAIL_PREFIX: &str = "EMAIL#";
pub const OPEN_SUFFIX: &str = "#OPEN";
pub const METADATA_SK: &str = "#METADATA";
pub const META_SK: &str = "#META";

/// `ORG#<orgId>`: an organisation's partition (itself, departments,
/// employees, job postings).
pub fn org_pk(org_id: &str) -> String {
    format!("{ORG_PREFIX}{org_id}")
}

/// `DEPT#<deptId>`: a department's sort key in its organisation, and the
/// partition of its DeptEmployee items (AP7).
pub fn dept_key(dept_id: &str) -> String {
    format!("{DEPT_PREFIX}{dept_id}")
}

/// `EMP#<empId>`: an employee's sort key (in the org and in DeptEmployee),
/// the employee's GSI1SK, and the GSI1PK of their applications (AP11).
pub fn emp_key(emp_id: &str) -> String {
    format!("{EMP_PREFIX}{emp_id}")
}

/// The email as it appears in keys: lower-cased with Unicode rules.
pub fn normalize_email(email: &str) -> String {
    email.to_lowercase()
}

/// `EMAIL#<email, lower-cased>`: an employee's GSI1PK (AP4).
pub fn email_gsi1pk(email: &str) -> String {
    format!("{EMAIL_PREFIX}{}", normalize_email(email))
}

/// `JOB#<postedAt>#<jobId>`: a posting's sort key and (while open) GSI1SK.
pub fn job_sk(posted_at: &str, job_id: &str) -> String {
    format!("{JOB_PREFIX}{posted_at}#{job_id}")
}

/// `ORG#<orgId>#OPEN`: GSI1PK of an organisation's open postings (AP8).
pub fn open_jobs_gsi1pk(org_id: &str) -> String {
    format!("{ORG_PREFIX}{org_id}{OPEN_SUFFIX}")
}

/// `JOB#<jobId>`: the partition of a posting's applications (AP10) and of
/// its lookup item (AP9).
pub fn job_pk(job_id: &str) -> String {
    format!("{JOB_PREFIX}{job_id}")
}

/// `APP#<submittedAt>#<appId>`: an application's sort key and GSI1SK.
pub fn app_sk(submitted_at: &str, app_id: &str) -> String {
    format!("{APP_PREFIX}{submitted_at}#{app_id}")
}

/// What an item is, by its key alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `ORG#<orgId>` / `#METADATA` (writer).
    Org,
    /// `ORG#<orgId>` / `DEPT#<deptId>` (writer, + processor `headcount`).
    Dept,
    /// `ORG#<orgId>` / `EMP#<empId>` (writer).
    Emp,
    /// `ORG#<orgId>` / `JOB#<postedAt>#<jobId>` (writer).
    Job,
    /// `JOB#<jobId>` / `APP#<submittedAt>#<appId>` (writer).
    App,
    /// `DEPT#<deptId>` / `EMP#<empId>` (processor).
    DeptEmp,
    /// `JOB#<jobId>` / `#META` (processor).
    JobLookup,
}

impl Kind {
    /// The `type` value items of this kind carry.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Org => types::ORG,
            Kind::Dept => types::DEPT,
            Kind::Emp => types::EMP,
            Kind::Job => types::JOB,
            Kind::App => types::APP,
            Kind::DeptEmp => types::DEPT_EMP,
            Kind::JobLookup => types::JOB_LOOKUP,
        }
    }

    /// Items the processor owns (they imply nothing).
    pub fn processor_owned(self) -> bool {
        matches!(self, Kind::DeptEmp | Kind::JobLookup)
    }
}

/// Classifies a key; `None` for keys no entity of the model has.
pub fn kind(pk: &str, sk: &str) -> Option<Kind> {
    if pk.strip_prefix(ORG_PREFIX).is_some() {
        if sk == METADATA_SK {
            Some(Kind::Org)
        } else if sk.starts_with(DEPT_PREFIX) {
            Some(Kind::Dept)
        } else if sk.starts_with(EMP_PREFIX) {
            Some(Kind::Emp)
        } else if sk.starts_with(JOB_PREFIX) {
            Some(Kind::Job)
        } else {
            None
        }
    } else if pk.starts_with(DEPT_PREFIX) && sk.starts_with(EMP_PREFIX) {
        Some(Kind::DeptEmp)
    } else if pk.starts_with(JOB_PREFIX) {
        if sk == META_SK {
            Some(Kind::JobLookup)
        } else if sk.starts_with(APP_PREFIX) {
            Some(Kind::App)
        } else {
            None
        }
    } else {
        None
    }
}

/// `(orgId, deptId)` of a Department key `ORG#<orgId>` / `DEPT#<deptId>`.
pub fn split_dept_key<'a>(pk: &'a str, sk: &'a str) -> Option<(&'a str, &'a str)> {
    let org = pk.strip_prefix(ORG_PREFIX)?;
    let dept = sk.strip_prefix(DEPT_PREFIX)?;
    Some((org, dept))
}

#[cfg(test)]
mod tests {
    use super::*;

    const O: &str = "01HXAA0000000000000000000A";
    const D: &str = "01HXAB0000000000000000000B";
    const E: &str = "01HXAD0000000000000000000D";
    const J: &str = "01HXAF0000000000000000000F";
    const T: &str = "01HXZZ1000000000000000000Z";
    const A: &str = "01HXAH0000000000000000000H";

    #[test]
    fn key_formats_of_the_seed() {
        assert_eq!(org_pk(O), format!("ORG#{O}"));
        assert_eq!(dept_key(D), format!("DEPT#{D}"));
        assert_eq!(emp_key(E), format!("EMP#{E}"));
        assert_eq!(email_gsi1pk("Alice@Acme.CO"), "EMAIL#alice@acme.co");
        assert_eq!(job_sk(T, J), format!("JOB#{T}#{J}"));
        assert_eq!(open_jobs_gsi1pk(O), format!("ORG#{O}#OPEN"));
        assert_eq!(job_pk(J), format!("JOB#{J}"));
        assert_eq!(app_sk(T, A), format!("APP#{T}#{A}"));
    }

    #[test]
    fn emails_are_lower_cased_with_unicode_rules() {
        assert_eq!(normalize_email("ÉMILE@Café.FR"), "émile@café.fr");
        assert_eq!(normalize_email("ΣΟΦΙΑ@x.gr"), "σοφια@x.gr");
        assert_eq!(email_gsi1pk("İlkay@x.tr"), "EMAIL#i\u{307}lkay@x.tr");
    }

    #[test]
    fn keys_classify_every_entity() {
        let cases = [
            (org_pk(O), METADATA_SK.to_string(), Some(Kind::Org)),
            (org_pk(O), dept_key(D), Some(Kind::Dept)),
            (org_pk(O), emp_key(E), Some(Kind::Emp)),
            (org_pk(O), job_sk(T, J), Some(Kind::Job)),
            (job_pk(J), app_sk(T, A), Some(Kind::App)),
            (dept_key(D), emp_key(E), Some(Kind::DeptEmp)),
            (job_pk(J), META_SK.to_string(), Some(Kind::JobLookup)),
            (org_pk(O), "X#1".to_string(), None),
            (job_pk(J), "#METADATA".to_string(), None),
            ("USER#1".to_string(), "EMP#1".to_string(), None),
            (dept_key(D), dept_key(D), None),
        ];
        for (pk, sk, want) in cases {
            assert_eq!(kind(&pk, &sk), want, "{pk} / {sk}");
        }
        assert!(Kind::DeptEmp.processor_owned() && Kind::JobLookup.processor_owned());
        assert!(!Kind::Emp.processor_owned());
    }

    #[test]
    fn department_keys_split_back() {
        assert_eq!(split_dept_key(&org_pk(O), &dept_key(D)), Some((O, D)));
        assert_eq!(split_dept_key(&org_pk(O), &emp_key(E)), None);
    }
}
