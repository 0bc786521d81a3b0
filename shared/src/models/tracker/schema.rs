//! The seed's attributes, types, enums and limits (seed 001), and validation.

use crate::error::InputError;
use crate::item::{display_key, AttrError, Item, ItemExt};

pub const APPLICATION_STATUS: [&str; 8] = [
    "unsubmitted",
    "applied",
    "rejected",
    "interviewing",
    "given offer",
    "accepted offer",
    "declined offer",
    "no offer",
];

pub const COMPANY_CATEGORY: [&str; 19] = [
    "education",
    "health",
    "climate",
    "ai",
    "energy",
    "finance",
    "enterprise-software",
    "consumer-tech",
    "e-commerce",
    "cybersecurity",
    "gaming",
    "media-entertainment",
    "consulting",
    "government",
    "nonprofit",
    "retail",
    "restaurant",
    "hospitality",
    "other",
];

pub const JOB_SOURCE: [&str; 7] = [
    "recruiter",
    "linkedin",
    "indeed",
    "friend",
    "colleague",
    "company-website",
    "other",
];

/// User-visible application fields and their history labels, in the order
/// the labels appear in an "Updated ..." description.
pub const LABELS: [(&str, &str); 16] = [
    ("companyName", "Company Name"),
    ("positionTitle", "Position Title"),
    ("dateApplied", "Date Applied"),
    ("status", "Status"),
    ("companyUrl", "Company URL"),
    ("jobPostingUrl", "Job Posting URL"),
    ("companyCareerUrl", "Career Page URL"),
    ("companyCategory", "Company Category"),
    ("skillsMatch", "Skills Match"),
    ("jobSource", "Job Source"),
    ("coverLetterRequired", "Cover Letter Required"),
    ("specialRequirements", "Special Requirements"),
    ("salaryMin", "Min Salary"),
    ("salaryMax", "Max Salary"),
    ("notes", "Notes"),
    ("offerDueDate", "Offer Due Date"),
];

/// The fields of an interview stage that appear in a snapshot.
pub const STAGE_FIELDS: [&str; 7] = [
    "id",
    "name",
    "order",
    "isCompleted",
    "completedDate",
    "notes",
    "performanceRating",
];

fn invalid(name: &str, reason: impl Into<String>) -> AttrError {
    AttrError::Invalid {
        name: name.to_string(),
        reason: reason.into(),
    }
}

fn max_len(item: &Item, name: &str, max: usize, required: bool) -> Result<(), AttrError> {
    let v = if required {
        Some(item.s(name)?)
    } else {
        item.opt_s(name)?
    };
    match v {
        Some(v) if v.chars().count() > max => {
            Err(invalid(name, format!("longer than {max} characters")))
        }
        _ => Ok(()),
    }
}

fn one_of(item: &Item, name: &str, allowed: &[&str], required: bool) -> Result<(), AttrError> {
    let v = if required {
        Some(item.s(name)?)
    } else {
        item.opt_s(name)?
    };
    match v {
        Some(v) if !allowed.contains(&v) => {
            Err(invalid(name, "not one of the allowed values".to_string()))
        }
        _ => Ok(()),
    }
}

fn int_range(item: &Item, name: &str, min: i64, max: i64, required: bool) -> Result<(), AttrError> {
    let v = if required {
        Some(item.i64(name)?)
    } else {
        item.opt_i64(name)?
    };
    match v {
        Some(v) if v < min || v > max => {
            Err(invalid(name, format!("{v} is outside {min}..={max}")))
        }
        _ => Ok(()),
    }
}

fn iso_date(item: &Item, name: &str) -> Result<(), AttrError> {
    match item.opt_s(name)? {
        Some(v) if chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").is_err() => {
            Err(invalid(name, "not an ISO date (YYYY-MM-DD)"))
        }
        _ => Ok(()),
    }
}

fn attr_err<'a>(entity: &'static str, item: &'a Item) -> impl Fn(AttrError) -> InputError + 'a {
    move |source| InputError::Attribute {
        entity,
        key: display_key(&crate::item::key_of(item, &["PK", "SK"])),
        source,
    }
}

/// Checks an Application item against the seed.
pub fn validate_application(item: &Item) -> Result<(), InputError> {
    let check = || -> Result<(), AttrError> {
        item.s("id")?;
        max_len(item, "companyName", 200, true)?;
        max_len(item, "positionTitle", 200, true)?;
        one_of(item, "status", &APPLICATION_STATUS, true)?;
        iso_date(item, "dateApplied")?;
        for url in ["companyUrl", "jobPostingUrl", "companyCareerUrl"] {
            item.opt_s(url)?;
        }
        one_of(item, "companyCategory", &COMPANY_CATEGORY, false)?;
        int_range(item, "skillsMatch", 1, 5, false)?;
        one_of(item, "jobSource", &JOB_SOURCE, false)?;
        item.opt_bool("coverLetterRequired")?;
        max_len(item, "specialRequirements", 5000, false)?;
        int_range(item, "salaryMin", 0, i64::MAX, false)?;
        int_range(item, "salaryMax", 0, i64::MAX, false)?;
        max_len(item, "notes", 5000, false)?;
        iso_date(item, "offerDueDate")?;
        item.bool("isArchived")?;
        item.s("createdAt")?;
        item.s("updatedAt")?;
        Ok(())
    };
    check().map_err(attr_err("Application", item))?;
    check_id_matches_key(item)
}

fn check_id_matches_key(item: &Item) -> Result<(), InputError> {
    let pk = item.s("PK").ok().and_then(|pk| pk.strip_prefix("APP#"));
    let id = item.s("id").ok();
    if pk != id && item.s("SK").ok() == item.s("PK").ok() {
        return Err(InputError::Invalid {
            key: display_key(&crate::item::key_of(item, &["PK", "SK"])),
            reason: "attribute `id` does not match the key APP#<id>".to_string(),
        });
    }
    Ok(())
}

/// Checks an InterviewStage item against the seed.
pub fn validate_stage(item: &Item) -> Result<(), InputError> {
    let check = || -> Result<(), AttrError> {
        item.s("id")?;
        item.s("applicationId")?;
        max_len(item, "name", 100, true)?;
        int_range(item, "order", 0, i64::MAX, true)?;
        item.bool("isCompleted")?;
        iso_date(item, "completedDate")?;
        max_len(item, "notes", 2000, false)?;
        int_range(item, "performanceRating", 1, 5, false)?;
        Ok(())
    };
    check().map_err(attr_err("InterviewStage", item))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::item::{n, s};
    use aws_sdk_dynamodb::types::AttributeValue;

    pub fn app(id: &str) -> Item {
        [
            ("PK", s(format!("APP#{id}"))),
            ("SK", s(format!("APP#{id}"))),
            ("id", s(id)),
            ("companyName", s("Acme")),
            ("positionTitle", s("Engineer")),
            ("status", s("applied")),
            ("isArchived", AttributeValue::Bool(false)),
            ("createdAt", s("2026-01-01T00:00:00.000Z")),
            ("updatedAt", s("2026-01-01T00:00:00.000Z")),
            ("salaryMin", n(100)),
            ("notes", AttributeValue::Null(true)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    pub fn stage(app_id: &str, id: &str, name: &str, order: i64) -> Item {
        [
            ("PK", s(format!("APP#{app_id}"))),
            ("SK", s(format!("STAGE#{id}"))),
            ("id", s(id)),
            ("applicationId", s(app_id)),
            ("name", s(name)),
            ("order", n(order)),
            ("isCompleted", AttributeValue::Bool(false)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    #[test]
    fn valid_items_pass() {
        assert_eq!(validate_application(&app("a")), Ok(()));
        assert_eq!(validate_stage(&stage("a", "s", "Phone", 0)), Ok(()));
    }

    #[test]
    fn invalid_enum_names_attribute_and_key_never_the_value() {
        let mut a = app("a");
        a.insert("status".into(), s("ghosted"));
        let err = validate_application(&a).unwrap_err();
        assert_eq!(err.kind(), "InvalidValue");
        let msg = err.to_string();
        assert!(
            msg.contains("status") && !msg.contains("ghosted") && msg.contains("PK=APP#a"),
            "{msg}"
        );
    }

    #[test]
    fn wrong_type_limits_and_dates_are_rejected() {
        let mut a = app("a");
        a.insert("isArchived".into(), s("false"));
        assert_eq!(validate_application(&a).unwrap_err().kind(), "WrongType");
        let mut a = app("a");
        a.insert("companyName".into(), s("x".repeat(201)));
        assert_eq!(validate_application(&a).unwrap_err().kind(), "InvalidValue");
        let mut a = app("a");
        a.insert("dateApplied".into(), s("01/02/2026"));
        assert_eq!(validate_application(&a).unwrap_err().kind(), "InvalidValue");
        let mut a = app("a");
        a.insert("skillsMatch".into(), n(6));
        assert_eq!(validate_application(&a).unwrap_err().kind(), "InvalidValue");
        let mut a = app("a");
        a.insert("id".into(), s("b"));
        assert_eq!(validate_application(&a).unwrap_err().kind(), "Invalid");
        let mut st = stage("a", "s", "Phone", 0);
        st.insert("order".into(), n(-1));
        assert_eq!(validate_stage(&st).unwrap_err().kind(), "InvalidValue");
    }
}
