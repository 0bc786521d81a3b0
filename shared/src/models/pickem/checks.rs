//! `verify`'s checks of the scoring job's data: every prediction carries the
//! `points`/`mcorrect` its event's matches imply. (Its GSI keys and
//! `belongsto` follow from the stored points and are checked generically as
//! a projection; the standings as counters.)

use super::entities::{key_display, Prediction};
use super::messages::{encode, ScoreJob};
use super::rules::{MCORRECT, POINTS, SCORING_QUEUE};
use super::scoring::expected_scores;
use crate::item::n;
use crate::models::{CheckInput, Drift, Finding, Repair};

/// Kind of the findings.
pub const PREDICTION_SCORE: &str = "prediction score";

/// Predictions whose stored score differs from what the matches imply,
/// each repaired by re-running its scoring job (through the job's guards).
pub fn checks(input: &CheckInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (item, sc) in expected_scores(input.items) {
        let stored = (item.get(POINTS), item.get(MCORRECT));
        if stored == (Some(&n(sc.points)), Some(&n(sc.mcorrect))) {
            continue;
        }
        let Ok(p) = Prediction::parse(&item) else {
            continue;
        };
        let show = |v: Option<&aws_sdk_dynamodb::types::AttributeValue>| match v {
            Some(aws_sdk_dynamodb::types::AttributeValue::N(x)) => x.clone(),
            Some(_) => "not a number".to_string(),
            None => "absent".to_string(),
        };
        out.push(Finding {
            kind: PREDICTION_SCORE,
            drift: Drift::Wrong,
            what: format!(
                "{}: points/mcorrect are {}/{}, the matches imply {}/{}",
                key_display(&item),
                show(stored.0),
                show(stored.1),
                sc.points,
                sc.mcorrect
            ),
            repair: Some(Repair::Job {
                queue: SCORING_QUEUE,
                body: encode(&ScoreJob::Predictions {
                    event_id: p.event.as_str().to_string(),
                    users: vec![p.user],
                }),
            }),
        });
    }
    out
}
