//! The HR SaaS's writer entities, parsed and validated from items (SPEC
//! §5.2): required attributes and their types, enums, ULIDs for every id and
//! for `postedAt`/`submittedAt`, the `type` attribute, and keys that agree
//! with the attributes they are built from. One [`Entity::parse`] serves
//! every rule aspect, so bad input changes nothing at all.

use super::keys::{self, Kind};
use crate::error::InputError;
use crate::item::{display_key, key_of, AttrError, Item, ItemExt};

/// An item's key for logs (never the item).
pub fn key_display(item: &Item) -> String {
    display_key(&key_of(item, &[keys::PK, keys::SK]))
}

fn attr_err<'a>(entity: &'static str, item: &'a Item) -> impl Fn(AttrError) -> InputError + 'a {
    move |source| InputError::Attribute {
        entity,
        key: key_display(item),
        source,
    }
}

fn invalid(name: &str, reason: impl Into<String>) -> AttrError {
    AttrError::Invalid {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// Whether `s` is a ULID as the `ulid` crate parses it (SPEC §5.2: 26
/// Crockford base32 characters, case-insensitive).
pub fn is_ulid(s: &str) -> bool {
    ulid::Ulid::from_string(s).is_ok()
}

macro_rules! ulid_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Validates a ULID.
            pub fn parse(raw: &str) -> Result<Self, String> {
                if is_ulid(raw) {
                    Ok(Self(raw.to_string()))
                } else {
                    Err("not a ULID (26 Crockford base32 characters)".to_string())
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

ulid_newtype!(
    /// An organisation's id.
    OrgId
);
ulid_newtype!(
    /// A department's id.
    DeptId
);
ulid_newtype!(
    /// An employee's id.
    EmpId
);
ulid_newtype!(
    /// A job posting's id.
    JobId
);
ulid_newtype!(
    /// An application's id.
    AppId
);
ulid_newtype!(
    /// A ULID used as a time-ordered stamp (`postedAt`, `submittedAt`).
    Stamp
);

/// Reads one validated attribute of an item.
struct Reader<'a> {
    entity: &'static str,
    item: &'a Item,
}

impl<'a> Reader<'a> {
    fn err(&self, source: AttrError) -> InputError {
        attr_err(self.entity, self.item)(source)
    }

    fn s(&self, name: &str) -> Result<&'a str, InputError> {
        self.item.s(name).map_err(|e| self.err(e))
    }

    fn string(&self, name: &str) -> Result<String, InputError> {
        self.s(name).map(str::to_string)
    }

    fn opt_string(&self, name: &str) -> Result<Option<String>, InputError> {
        self.item
            .opt_s(name)
            .map(|v| v.map(str::to_string))
            .map_err(|e| self.err(e))
    }

    fn ulid<T>(&self, name: &str, f: fn(&str) -> Result<T, String>) -> Result<T, InputError> {
        let raw = self.s(name)?;
        f(raw).map_err(|reason| self.err(invalid(name, reason)))
    }

    fn one_of<T: Copy>(&self, name: &str, allowed: &[(&str, T)]) -> Result<T, InputError> {
        let raw = self.s(name)?;
        allowed
            .iter()
            .find(|(v, _)| *v == raw)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                let names: Vec<&str> = allowed.iter().map(|(v, _)| *v).collect();
                self.err(invalid(name, format!("not one of {}", names.join("|"))))
            })
    }

    /// `type` must name this entity.
    fn check_type(&self, kind: Kind) -> Result<(), InputError> {
        let t = self.s(keys::TYPE)?;
        if t != kind.type_name() {
            return Err(self.err(invalid(
                keys::TYPE,
                format!("does not match the key (expected `{}`)", kind.type_name()),
            )));
        }
        Ok(())
    }

    /// The item's keys must be the ones built from its attributes.
    fn check_keys(&self, pk: &str, sk: &str) -> Result<(), InputError> {
        if self.item.s(keys::PK).ok() != Some(pk) || self.item.s(keys::SK).ok() != Some(sk) {
            return Err(InputError::Invalid {
                key: key_display(self.item),
                reason: format!(
                    "{}: keys do not match the attributes (expected PK={pk}, SK={sk})",
                    self.entity
                ),
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    Free,
    Pro,
    Enterprise,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrgStatus {
    Active,
    Suspended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Manager,
    Employee,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmpStatus {
    Active,
    Inactive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Draft,
    Open,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppStatus {
    Applied,
    Reviewing,
    Rejected,
    Accepted,
}

/// Organisation (`ORG#<orgId>` / `#METADATA`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Org {
    pub org_id: OrgId,
    pub name: String,
    pub plan: Plan,
    pub status: OrgStatus,
    pub created_at: String,
}

/// Department (`ORG#<orgId>` / `DEPT#<deptId>`); `headcount` is the
/// processor's and is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dept {
    pub dept_id: DeptId,
    pub org_id: OrgId,
    pub name: String,
    pub manager_id: EmpId,
}

/// Employee (`ORG#<orgId>` / `EMP#<empId>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emp {
    pub emp_id: EmpId,
    pub org_id: OrgId,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub department_id: DeptId,
    pub role: Role,
    pub status: EmpStatus,
    pub hired_at: String,
    pub terminated_at: Option<String>,
}

/// JobPosting (`ORG#<orgId>` / `JOB#<postedAt>#<jobId>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub job_id: JobId,
    pub org_id: OrgId,
    pub department_id: DeptId,
    pub title: String,
    pub status: JobStatus,
    pub posted_at: Stamp,
    pub closed_at: Option<String>,
}

/// Application (`JOB#<jobId>` / `APP#<submittedAt>#<appId>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub app_id: AppId,
    pub job_id: JobId,
    pub emp_id: EmpId,
    pub status: AppStatus,
    pub submitted_at: Stamp,
}

/// An item of the model, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    Org(Org),
    Dept(Dept),
    Emp(Emp),
    Job(Job),
    App(App),
    /// A processor-owned item (DeptEmployee, job lookup): implies nothing.
    Processor(Kind),
}

/// The item's kind by its key; a missing key or one no entity has is bad
/// input.
pub fn kind_of(item: &Item) -> Result<Kind, InputError> {
    let e = attr_err("item", item);
    let pk = item.s(keys::PK).map_err(&e)?;
    let sk = item.s(keys::SK).map_err(&e)?;
    keys::kind(pk, sk).ok_or_else(|| InputError::UnknownEntity {
        key: key_display(item),
    })
}

impl Entity {
    /// Classifies and validates a whole item.
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let kind = kind_of(item)?;
        Ok(match kind {
            Kind::Org => Entity::Org(Org::parse(item)?),
            Kind::Dept => Entity::Dept(Dept::parse(item)?),
            Kind::Emp => Entity::Emp(Emp::parse(item)?),
            Kind::Job => Entity::Job(Job::parse(item)?),
            Kind::App => Entity::App(App::parse(item)?),
            Kind::DeptEmp | Kind::JobLookup => Entity::Processor(kind),
        })
    }
}

impl Org {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let r = Reader {
            entity: "Organisation",
            item,
        };
        r.check_type(Kind::Org)?;
        let org = Org {
            org_id: r.ulid("orgId", OrgId::parse)?,
            name: r.string("name")?,
            plan: r.one_of(
                "plan",
                &[
                    ("free", Plan::Free),
                    ("pro", Plan::Pro),
                    ("enterprise", Plan::Enterprise),
                ],
            )?,
            status: r.one_of(
                "status",
                &[
                    ("active", OrgStatus::Active),
                    ("suspended", OrgStatus::Suspended),
                ],
            )?,
            created_at: r.string("createdAt")?,
        };
        r.check_keys(&keys::org_pk(org.org_id.as_str()), keys::METADATA_SK)?;
        Ok(org)
    }
}

impl Dept {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let r = Reader {
            entity: "Department",
            item,
        };
        r.check_type(Kind::Dept)?;
        let dept = Dept {
            dept_id: r.ulid("deptId", DeptId::parse)?,
            org_id: r.ulid("orgId", OrgId::parse)?,
            name: r.string("name")?,
            manager_id: r.ulid("managerId", EmpId::parse)?,
        };
        r.check_keys(
            &keys::org_pk(dept.org_id.as_str()),
            &keys::dept_key(dept.dept_id.as_str()),
        )?;
        Ok(dept)
    }
}

impl Emp {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let r = Reader {
            entity: "Employee",
            item,
        };
        r.check_type(Kind::Emp)?;
        let email = r.string("email")?;
        if email.trim().is_empty() {
            return Err(r.err(invalid("email", "empty")));
        }
        let emp = Emp {
            emp_id: r.ulid("empId", EmpId::parse)?,
            org_id: r.ulid("orgId", OrgId::parse)?,
            email,
            first_name: r.string("firstName")?,
            last_name: r.string("lastName")?,
            department_id: r.ulid("departmentId", DeptId::parse)?,
            role: r.one_of(
                "role",
                &[
                    ("admin", Role::Admin),
                    ("manager", Role::Manager),
                    ("employee", Role::Employee),
                ],
            )?,
            status: r.one_of(
                "status",
                &[
                    ("active", EmpStatus::Active),
                    ("inactive", EmpStatus::Inactive),
                ],
            )?,
            hired_at: r.string("hiredAt")?,
            terminated_at: r.opt_string("terminatedAt")?,
        };
        r.check_keys(
            &keys::org_pk(emp.org_id.as_str()),
            &keys::emp_key(emp.emp_id.as_str()),
        )?;
        Ok(emp)
    }
}

impl Job {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let r = Reader {
            entity: "JobPosting",
            item,
        };
        r.check_type(Kind::Job)?;
        let job = Job {
            job_id: r.ulid("jobId", JobId::parse)?,
            org_id: r.ulid("orgId", OrgId::parse)?,
            department_id: r.ulid("departmentId", DeptId::parse)?,
            title: r.string("title")?,
            status: r.one_of(
                "status",
                &[
                    ("draft", JobStatus::Draft),
                    ("open", JobStatus::Open),
                    ("closed", JobStatus::Closed),
                ],
            )?,
            posted_at: r.ulid("postedAt", Stamp::parse)?,
            closed_at: r.opt_string("closedAt")?,
        };
        r.check_keys(&keys::org_pk(job.org_id.as_str()), &job.sk())?;
        Ok(job)
    }

    /// `JOB#<postedAt>#<jobId>`.
    pub fn sk(&self) -> String {
        keys::job_sk(self.posted_at.as_str(), self.job_id.as_str())
    }
}

impl App {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let r = Reader {
            entity: "Application",
            item,
        };
        r.check_type(Kind::App)?;
        let app = App {
            app_id: r.ulid("appId", AppId::parse)?,
            job_id: r.ulid("jobId", JobId::parse)?,
            emp_id: r.ulid("empId", EmpId::parse)?,
            status: r.one_of(
                "status",
                &[
                    ("applied", AppStatus::Applied),
                    ("reviewing", AppStatus::Reviewing),
                    ("rejected", AppStatus::Rejected),
                    ("accepted", AppStatus::Accepted),
                ],
            )?,
            submitted_at: r.ulid("submittedAt", Stamp::parse)?,
        };
        r.check_keys(&keys::job_pk(app.job_id.as_str()), &app.sk())?;
        Ok(app)
    }

    /// `APP#<submittedAt>#<appId>`.
    pub fn sk(&self) -> String {
        keys::app_sk(self.submitted_at.as_str(), self.app_id.as_str())
    }
}

/// Item builders of valid writer items, shared by the model's tests, the
/// demo and the benchmark. Ids must be ULIDs for the items to be valid.
pub mod build {
    use super::keys::{self, types};
    use crate::item::{s, Item};

    fn item(pairs: Vec<(&str, String)>) -> Item {
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), s(v)))
            .collect()
    }

    pub fn org(org_id: &str, name: &str, plan: &str) -> Item {
        item(vec![
            (keys::PK, keys::org_pk(org_id)),
            (keys::SK, keys::METADATA_SK.to_string()),
            (keys::TYPE, types::ORG.to_string()),
            ("orgId", org_id.to_string()),
            ("name", name.to_string()),
            ("plan", plan.to_string()),
            ("status", "active".to_string()),
            ("createdAt", "2026-01-05T09:00:00.000Z".to_string()),
        ])
    }

    pub fn dept(org_id: &str, dept_id: &str, name: &str, manager_id: &str) -> Item {
        item(vec![
            (keys::PK, keys::org_pk(org_id)),
            (keys::SK, keys::dept_key(dept_id)),
            (keys::TYPE, types::DEPT.to_string()),
            ("deptId", dept_id.to_string()),
            ("orgId", org_id.to_string()),
            ("name", name.to_string()),
            ("managerId", manager_id.to_string()),
        ])
    }

    /// An active employee with role `employee`.
    pub fn emp(org_id: &str, emp_id: &str, email: &str, first: &str, dept_id: &str) -> Item {
        item(vec![
            (keys::PK, keys::org_pk(org_id)),
            (keys::SK, keys::emp_key(emp_id)),
            (keys::TYPE, types::EMP.to_string()),
            ("empId", emp_id.to_string()),
            ("orgId", org_id.to_string()),
            ("email", email.to_string()),
            ("firstName", first.to_string()),
            ("lastName", "Example".to_string()),
            ("departmentId", dept_id.to_string()),
            ("role", "employee".to_string()),
            ("status", "active".to_string()),
            ("hiredAt", "2026-01-06".to_string()),
        ])
    }

    pub fn job(
        org_id: &str,
        job_id: &str,
        posted_at: &str,
        dept_id: &str,
        title: &str,
        status: &str,
    ) -> Item {
        item(vec![
            (keys::PK, keys::org_pk(org_id)),
            (keys::SK, keys::job_sk(posted_at, job_id)),
            (keys::TYPE, types::JOB.to_string()),
            ("jobId", job_id.to_string()),
            ("orgId", org_id.to_string()),
            ("departmentId", dept_id.to_string()),
            ("title", title.to_string()),
            ("status", status.to_string()),
            ("postedAt", posted_at.to_string()),
        ])
    }

    pub fn app(job_id: &str, app_id: &str, submitted_at: &str, emp_id: &str, status: &str) -> Item {
        item(vec![
            (keys::PK, keys::job_pk(job_id)),
            (keys::SK, keys::app_sk(submitted_at, app_id)),
            (keys::TYPE, types::APP.to_string()),
            ("appId", app_id.to_string()),
            ("jobId", job_id.to_string()),
            ("empId", emp_id.to_string()),
            ("status", status.to_string()),
            ("submittedAt", submitted_at.to_string()),
        ])
    }

    /// A deterministic ULID: `ms` milliseconds since the epoch, then `n`.
    pub fn ulid(ms: u64, n: u128) -> String {
        ulid::Ulid::from_parts(ms, n).to_string()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::build::*;
    use super::*;
    use crate::item::{n, s};

    pub const O: &str = "01HXAA0000000000000000000A";
    pub const D: &str = "01HXAB0000000000000000000B";
    pub const E: &str = "01HXAD0000000000000000000D";
    pub const J: &str = "01HXAF0000000000000000000F";
    pub const T: &str = "01HXZZ1000000000000000000Z";
    pub const A: &str = "01HXAH0000000000000000000H";

    fn kind_err(item: &Item) -> &'static str {
        Entity::parse(item).unwrap_err().kind()
    }

    #[test]
    fn valid_items_parse() {
        assert!(matches!(
            Entity::parse(&org(O, "Acme", "pro")).unwrap(),
            Entity::Org(_)
        ));
        let d = Dept::parse(&dept(O, D, "Eng", E)).unwrap();
        assert_eq!(d.manager_id.as_str(), E);
        let e = Emp::parse(&emp(O, E, "Alice@Acme.co", "Alice", D)).unwrap();
        assert_eq!(e.status, EmpStatus::Active);
        assert_eq!(e.terminated_at, None);
        let j = Job::parse(&job(O, J, T, D, "Engineer", "open")).unwrap();
        assert_eq!(j.sk(), format!("JOB#{T}#{J}"));
        let a = App::parse(&app(J, A, T, E, "reviewing")).unwrap();
        assert_eq!(a.status, AppStatus::Reviewing);
        // Lower-case ULIDs are ULIDs too (keys use them as written).
        let lower = O.to_lowercase();
        assert!(Org::parse(&org(&lower, "Acme", "free")).is_ok());
    }

    #[test]
    fn processor_items_are_recognised() {
        let mut de = Item::new();
        de.insert("PK".into(), s(keys::dept_key(D)));
        de.insert("SK".into(), s(keys::emp_key(E)));
        assert_eq!(
            Entity::parse(&de).unwrap(),
            Entity::Processor(Kind::DeptEmp)
        );
    }

    #[test]
    fn ids_and_stamps_must_be_ulids() {
        let cases: Vec<(Item, &str)> = vec![
            (org("org-1", "Acme", "pro"), "InvalidValue"),
            (dept(O, D, "Eng", "bob"), "InvalidValue"),
            (emp(O, "E1", "a@b.c", "A", D), "InvalidValue"),
            (emp(O, E, "a@b.c", "A", "engineering"), "InvalidValue"),
            // 26 characters, but `U` is not Crockford base32.
            (
                emp(O, "01HXAD000000000000000000UU", "a@b.c", "A", D),
                "InvalidValue",
            ),
            (job(O, J, &T[..25], D, "x", "open"), "InvalidValue"),
            (job(O, J, &format!("{T}0"), D, "x", "open"), "InvalidValue"),
            (
                job(O, J, "2026-01-01T00:00:00Z", D, "x", "open"),
                "InvalidValue",
            ),
            (
                app(J, A, T, "550e8400-e29b-41d4-a716-446655440000", "applied"),
                "InvalidValue",
            ),
            (app(J, A, "1700000000", E, "applied"), "InvalidValue"),
        ];
        for (item, want) in cases {
            assert_eq!(kind_err(&item), want, "{}", key_display(&item));
        }
    }

    #[test]
    fn enums_are_validated() {
        let mut o = org(O, "Acme", "gold");
        assert_eq!(kind_err(&o), "InvalidValue");
        o = org(O, "Acme", "pro");
        o.insert("status".into(), s("closed"));
        assert_eq!(kind_err(&o), "InvalidValue");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("role".into(), s("ceo"));
        assert_eq!(kind_err(&e), "InvalidValue");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("status".into(), s("Active"));
        let err = Entity::parse(&e).unwrap_err();
        assert_eq!(err.kind(), "InvalidValue");
        let msg = err.to_string();
        assert!(
            msg.contains("status") && msg.contains("active|inactive"),
            "{msg}"
        );
        assert!(!msg.contains("a@b.c"), "never the item: {msg}");
        assert_eq!(kind_err(&job(O, J, T, D, "x", "paused")), "InvalidValue");
        assert_eq!(kind_err(&app(J, A, T, E, "hired")), "InvalidValue");
    }

    #[test]
    fn types_and_required_attributes_are_checked() {
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.remove("lastName");
        assert_eq!(kind_err(&e), "MissingAttribute");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("email".into(), n(5));
        assert_eq!(kind_err(&e), "WrongType");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("email".into(), s("  "));
        assert_eq!(kind_err(&e), "InvalidValue");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("terminatedAt".into(), n(1));
        assert_eq!(kind_err(&e), "WrongType");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("type".into(), s("dept_emp"));
        assert_eq!(kind_err(&e), "InvalidValue");
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.remove("type");
        assert_eq!(kind_err(&e), "MissingAttribute");
    }

    #[test]
    fn keys_must_match_attributes() {
        let other = "01HXAC0000000000000000000C";
        let mut e = emp(O, E, "a@b.c", "A", D);
        e.insert("orgId".into(), s(other));
        assert_eq!(kind_err(&e), "Invalid");
        let mut j = job(O, J, T, D, "x", "open");
        j.insert("postedAt".into(), s(other));
        assert_eq!(kind_err(&j), "Invalid");
        let mut a = app(J, A, T, E, "applied");
        a.insert("jobId".into(), s(other));
        assert_eq!(kind_err(&a), "Invalid");
        let mut d = dept(O, D, "Eng", E);
        d.insert("deptId".into(), s(other));
        assert_eq!(kind_err(&d), "Invalid");
        let mut unknown = Item::new();
        unknown.insert("PK".into(), s("USER#1"));
        unknown.insert("SK".into(), s("X"));
        assert_eq!(kind_err(&unknown), "UnknownEntity");
        unknown.remove("SK");
        assert_eq!(kind_err(&unknown), "MissingAttribute");
    }

    #[test]
    fn deterministic_ulids_are_ulids() {
        let u = ulid(1_767_600_000_000, 42);
        assert_eq!(u.len(), 26);
        assert!(is_ulid(&u));
        assert!(ulid(1, 0) < ulid(2, 0));
    }
}
