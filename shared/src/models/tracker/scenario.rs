//! The scripted tracker scenario of `jobstream demo` (and of the tests): what
//! a user does, and the derived state it implies.

use crate::item::{n, s};
use aws_sdk_dynamodb::types::AttributeValue;

use super::writer::TrackerWriter;
use crate::models::BoxError;

/// What the scenario implies once processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Application id, company, and its history descriptions in order.
    pub histories: Vec<(&'static str, Vec<String>)>,
    /// Applications deleted (nothing of them may remain).
    pub deleted: Vec<&'static str>,
    /// META/COUNT.
    pub count: i64,
    /// GSI2 (active applications), most recently updated first.
    pub active: Vec<&'static str>,
    /// GSI1 partitions and the application ids in each.
    pub by_status: Vec<(String, Vec<&'static str>)>,
}

/// A clock for the scenario: one minute per step.
pub struct Clock(u32);

impl Clock {
    pub fn new() -> Self {
        Self(0)
    }
    /// The next timestamp.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> String {
        self.0 += 1;
        format!(
            "2026-11-01T{:02}:{:02}:00.000Z",
            9 + self.0 / 60,
            self.0 % 60
        )
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Plays the scenario. Application ids get `prefix` so several runs can
/// share a table.
pub async fn play(w: &TrackerWriter) -> Result<Expected, BoxError> {
    let mut t = Clock::new();
    w.create_application(
        "acme",
        "Acme Robotics",
        "Backend Engineer",
        "applied",
        &t.next(),
    )
    .await?;
    w.create_application(
        "globex",
        "Globex",
        "Data Engineer",
        "unsubmitted",
        &t.next(),
    )
    .await?;
    w.create_application(
        "initech",
        "Initech",
        "Site Reliability Engineer",
        "applied",
        &t.next(),
    )
    .await?;
    w.create_application(
        "umbrella",
        "Umbrella",
        "Platform Engineer",
        "applied",
        &t.next(),
    )
    .await?;

    w.update_application(
        "acme",
        &[
            ("status", s("interviewing")),
            ("notes", s("Referred by Sam")),
        ],
        &t.next(),
    )
    .await?;
    w.add_stage("acme", "s1", "Phone screen", 1).await?;
    w.add_stage("acme", "s2", "Onsite", 2).await?;
    w.update_stage(
        "acme",
        "s1",
        &[
            ("isCompleted", AttributeValue::Bool(true)),
            ("completedDate", s("2026-11-03")),
            ("performanceRating", n(4)),
        ],
    )
    .await?;
    w.remove_stage("acme", "s2").await?;
    w.update_application(
        "acme",
        &[
            ("status", s("given offer")),
            ("salaryMin", n(150000)),
            ("salaryMax", n(180000)),
        ],
        &t.next(),
    )
    .await?;

    // An updatedAt-only touch writes no entry (but folds into the state).
    w.update_application("globex", &[], &t.next()).await?;
    w.update_application(
        "globex",
        &[("companyUrl", s("https://globex.example"))],
        &t.next(),
    )
    .await?;
    w.set_archived("globex", true, &t.next()).await?;

    w.set_archived("initech", true, &t.next()).await?;
    w.set_archived("initech", false, &t.next()).await?;

    w.add_stage("umbrella", "u1", "Take-home", 1).await?;
    w.delete_application("umbrella").await?;

    Ok(Expected {
        histories: vec![
            (
                "acme",
                vec![
                    "Created application Acme Robotics - Backend Engineer".into(),
                    "Updated Status, Notes".into(),
                    "Added interview stage \"Phone screen\"".into(),
                    "Added interview stage \"Onsite\"".into(),
                    "Updated interview stage \"Phone screen\"".into(),
                    "Removed interview stage \"Onsite\"".into(),
                    "Updated Status, Min Salary, Max Salary".into(),
                ],
            ),
            (
                "globex",
                vec![
                    "Created application Globex - Data Engineer".into(),
                    "Updated Company URL".into(),
                    "Archived application".into(),
                ],
            ),
            (
                "initech",
                vec![
                    "Created application Initech - Site Reliability Engineer".into(),
                    "Archived application".into(),
                    "Restored from archive".into(),
                ],
            ),
        ],
        deleted: vec!["umbrella"],
        count: 2,
        active: vec!["initech", "acme"],
        by_status: vec![
            ("STATUS#given offer#ARCHIVED#0".into(), vec!["acme"]),
            ("STATUS#unsubmitted#ARCHIVED#1".into(), vec!["globex"]),
            ("STATUS#applied#ARCHIVED#0".into(), vec!["initech"]),
        ],
    })
}
