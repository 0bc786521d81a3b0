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

/// The relevance function as CEL over a model file's facts (`job`,
/// `seeker`), with the built-ins files already have: proven equal to
/// [`score`] and [`level`] for every value, huge and negative salaries
/// included (no expression overflows).
#[cfg(test)]
mod as_cel {
    use super::*;
    use crate::file::expr::{Env, Expr, Val};
    use crate::models::jobboard::entities::JobStatus;

    pub const SCORE: &str = "(size(job.skills) == 0 ? 6000 : 6000 * size(job.skills.filter(k, k in seeker.skills)) / size(job.skills)) + (seeker.desiredSalary == null || job.salaryMax == null || seeker.desiredSalary <= job.salaryMax ? 2500 : (job.salaryMax >= 0 && seeker.desiredSalary - job.salaryMax <= job.salaryMax / 10 ? 1250 : 0)) + (job.category != null && job.category in seeker.categories ? 1500 : 0)";

    fn level_expr() -> String {
        format!("({SCORE}) >= 7500 ? 1 : (({SCORE}) >= 5000 ? 2 : (({SCORE}) >= 3000 ? 3 : 0))")
    }

    fn set(v: &BTreeSet<String>) -> Val {
        Val::Set(v.iter().cloned().collect())
    }

    fn opt_int(v: Option<i64>) -> Val {
        v.map_or(Val::Null, Val::Int)
    }

    use std::collections::BTreeSet;

    #[test]
    fn the_cel_relevance_equals_the_rust_one_everywhere() {
        let env = Env::new().unwrap();
        let score_e = Expr::compile(SCORE).unwrap();
        let level_e = Expr::compile(&level_expr()).unwrap();
        let skill_sets: &[&[&str]] = &[&[], &["rust"], &["rust", "go"], &["go", "aws", "rust"]];
        let salaries = [
            None,
            Some(0),
            Some(-5),
            Some(100),
            Some(105),
            Some(110),
            Some(111),
            Some(120),
            Some(i64::MAX),
            Some(i64::MAX - 1),
            Some(i64::MAX / 10),
            Some(i64::MIN),
        ];
        let mut cases = 0;
        for js in skill_sets {
            for ss in skill_sets {
                for max in salaries {
                    for want in salaries {
                        for (cat, cats) in [
                            (None, &[][..]),
                            (Some("tech"), &["tech"][..]),
                            (Some("tech"), &["food"][..]),
                        ] {
                            let job = Job {
                                job_id: "j".into(),
                                employer_id: "e".into(),
                                city: "montreal".into(),
                                posted_at: "2026-11-01".into(),
                                zip: "H2X".into(),
                                title: "t".into(),
                                skills: js.iter().map(|s| s.to_string()).collect(),
                                category: cat.map(str::to_string),
                                salary_min: None,
                                salary_max: max,
                                status: JobStatus::Open,
                            };
                            let seeker = Seeker {
                                seeker_id: "s".into(),
                                name: "n".into(),
                                city: "Montreal".into(),
                                skills: ss.iter().map(|s| s.to_string()).collect(),
                                desired_salary: want,
                                categories: cats.iter().map(|s| s.to_string()).collect(),
                            };
                            let vars = [
                                (
                                    "job",
                                    Val::Map(vec![
                                        ("skills".into(), set(&job.skills)),
                                        ("salaryMax".into(), opt_int(job.salary_max)),
                                        (
                                            "category".into(),
                                            job.category.clone().map_or(Val::Null, Val::Str),
                                        ),
                                    ]),
                                ),
                                (
                                    "seeker",
                                    Val::Map(vec![
                                        ("skills".into(), set(&seeker.skills)),
                                        ("desiredSalary".into(), opt_int(seeker.desired_salary)),
                                        ("categories".into(), set(&seeker.categories)),
                                    ]),
                                ),
                            ];
                            let look = |n: &str| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v);
                            let want_score = score(&seeker, &job);
                            assert_eq!(
                                env.eval(&score_e, look),
                                Ok(Val::Int(want_score)),
                                "{job:?} {seeker:?}"
                            );
                            assert_eq!(
                                env.eval(&level_e, look),
                                Ok(Val::Int(level(want_score).map_or(0, i64::from))),
                                "{job:?} {seeker:?}"
                            );
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 4 * 4 * 12 * 12 * 3);
    }
}
