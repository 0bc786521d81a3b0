//! The relevance function of a (seeker, job) pair: deterministic, integer
//! arithmetic, documented in the README.
//!
//! score (0..=10000 basis points) =
//!   6000 x |job.skills ∩ seeker.skills| / |job.skills|   (a job listing no skills gives 6000)
//! + 2500 if the seeker has no desired salary, or it is <= job.salaryMax (or the job states no max);
//!   1250 if it is at most 10 % above job.salaryMax; else 0
//! + 1500 if job.category is one of the seeker's categories
//!
//! Level: R1 >= 7500, R2 >= 5000, R3 >= 3000; below 3000 no suggestion.

use super::entities::{Job, Seeker};

pub const SKILLS_WEIGHT: i64 = 6000;
pub const SALARY_WEIGHT: i64 = 2500;
pub const CATEGORY_WEIGHT: i64 = 1500;
pub const R1_MIN: i64 = 7500;
pub const R2_MIN: i64 = 5000;
pub const R3_MIN: i64 = 3000;

/// The pair's score in basis points.
pub fn score(seeker: &Seeker, job: &Job) -> i64 {
    let skills = if job.skills.is_empty() {
        SKILLS_WEIGHT
    } else {
        let common = job.skills.intersection(&seeker.skills).count() as i64;
        SKILLS_WEIGHT * common / job.skills.len() as i64
    };
    let salary = match (seeker.desired_salary, job.salary_max) {
        (None, _) | (_, None) => SALARY_WEIGHT,
        (Some(want), Some(max)) if want <= max => SALARY_WEIGHT,
        // Compared in i128: salaries come from input and may be huge.
        (Some(want), Some(max)) if i128::from(want) * 10 <= i128::from(max) * 11 => {
            SALARY_WEIGHT / 2
        }
        _ => 0,
    };
    let category = match &job.category {
        Some(c) if seeker.categories.contains(c) => CATEGORY_WEIGHT,
        _ => 0,
    };
    skills + salary + category
}

/// The relevance level of a score: 1 (best) ..= 3, `None` below R3.
pub fn level(score: i64) -> Option<u8> {
    match score {
        s if s >= R1_MIN => Some(1),
        s if s >= R2_MIN => Some(2),
        s if s >= R3_MIN => Some(3),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_salaries_do_not_overflow() {
        let mut j = job(&[], Some(i64::MAX), None);
        let mut s = seeker(&[], Some(i64::MAX), &[]);
        assert_eq!(score(&s, &j), SKILLS_WEIGHT + SALARY_WEIGHT);
        j.salary_max = Some(i64::MAX / 10);
        s.desired_salary = Some(i64::MAX);
        assert_eq!(
            score(&s, &j),
            SKILLS_WEIGHT,
            "far above the max: no salary points"
        );
        j.salary_max = Some(i64::MAX - 1);
        assert_eq!(score(&s, &j), SKILLS_WEIGHT + SALARY_WEIGHT / 2);
    }
    use crate::models::jobboard::entities::JobStatus;

    fn job(skills: &[&str], max: Option<i64>, category: Option<&str>) -> Job {
        Job {
            job_id: "j".into(),
            employer_id: "e".into(),
            city: "montreal".into(),
            posted_at: "2026-11-01".into(),
            zip: "H2X".into(),
            title: "t".into(),
            skills: skills.iter().map(|s| s.to_string()).collect(),
            category: category.map(str::to_string),
            salary_min: None,
            salary_max: max,
            status: JobStatus::Open,
        }
    }

    fn seeker(skills: &[&str], want: Option<i64>, categories: &[&str]) -> Seeker {
        Seeker {
            seeker_id: "s".into(),
            name: "n".into(),
            city: "Montreal".into(),
            skills: skills.iter().map(|s| s.to_string()).collect(),
            desired_salary: want,
            categories: categories.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn perfect_pair_scores_10000_and_is_r1() {
        let s = score(
            &seeker(&["rust", "aws"], Some(100), &["tech"]),
            &job(&["rust", "aws"], Some(120), Some("tech")),
        );
        assert_eq!(s, 10000);
        assert_eq!(level(s), Some(1));
    }

    #[test]
    fn components_add_up() {
        // half the skills, salary 5 % over max, other category: 3000 + 1250 + 0
        let s = score(
            &seeker(&["rust"], Some(105), &["food"]),
            &job(&["rust", "go"], Some(100), Some("tech")),
        );
        assert_eq!(s, 4250);
        assert_eq!(level(s), Some(3));
        // no skill in common, salary far over max, no category: nothing
        let s = score(
            &seeker(&["cobol"], Some(200), &[]),
            &job(&["rust"], Some(100), Some("tech")),
        );
        assert_eq!(s, 0);
        assert_eq!(level(s), None);
        // a job without skills counts as a full skills match
        assert_eq!(score(&seeker(&[], None, &[]), &job(&[], None, None)), 8500);
    }

    #[test]
    fn thresholds_are_inclusive() {
        assert_eq!(level(7500), Some(1));
        assert_eq!(level(7499), Some(2));
        assert_eq!(level(5000), Some(2));
        assert_eq!(level(4999), Some(3));
        assert_eq!(level(3000), Some(3));
        assert_eq!(level(2999), None);
    }
}
