//! A job board in miniature as a model file: suggestions as a join set
//! (the relevance as one CEL expression mapped to R1..R3, none below R3,
//! a TTL from the generation time that a rescoring to the same level does
//! not extend, the anti-join on requests and matches, a level change moving
//! the item in GSI1, closing a job deleting its suggestions) and matches as
//! a `once:` effect that deletes the pair's suggestion. Candidates are the
//! city's seekers and its jobs of the last 30 days.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item};
use shared::metrics::names;

use crate::items::{assert_clean, attrs, delete, key, partition, put, sks};
use crate::support::{model_env, temp_model};

const SCORE: &str = "((size(job.skills) == 0 ? 6000 : 6000 * size(job.skills.filter(k, k in seeker.skills)) / size(job.skills)) + (seeker.desiredSalary == null || job.salaryMax == null || seeker.desiredSalary <= job.salaryMax ? 2500 : (job.salaryMax >= 0 && seeker.desiredSalary - job.salaryMax <= job.salaryMax / 10 ? 1250 : 0)) + (job.category != null && job.category in seeker.categories ? 1500 : 0))";

fn board_yaml() -> String {
    let level = format!("({SCORE} >= 7500 ? 1 : ({SCORE} >= 5000 ? 2 : 3))");
    format!(
        r#"jobstream: 1
name: board
table:
  name: board
  pk: PK
  sk: SK
  ttl: ttl
  gsis: [{{ name: GSI1, pk: GSI1PK, sk: GSI1SK }}]
entities:
  job:
    key: {{ PK: "CITY#${{city}}", SK: "JOB#${{jobId}}" }}
    attributes:
      status: [open, closed]
      skills: set
      salaryMax: int?
      category: string?
      postedAt: string
  seeker:
    key: {{ PK: "CITY#${{city}}", SK: "SEEKER#${{seekerId}}" }}
    attributes:
      skills: set
      desiredSalary: int?
      categories: set
  request:
    key: {{ PK: "CITY#${{city}}", SK: "REQ#${{jobId}}#${{seekerId}}" }}
    attributes:
      status: [pending, approved]
      approvedAt: iso-utc?
  suggestion:
    owner: processor
    key: {{ PK: "SUG#${{city}}", SK: "S#${{jobId}}#${{seekerId}}" }}
    attributes:
      GSI1PK: string
      GSI1SK: string
      relevance: int
      score: int
      generatedAt: string
  match:
    owner: processor
    key: {{ PK: "CITY#${{city}}", SK: "MATCH#${{jobId}}#${{seekerId}}" }}
    attributes:
      matchedAt: iso-utc
sets:
  suggestions:
    entity: suggestion
    facts:
      job: {{ entity: job }}
      seeker: {{ entity: seeker }}
    unless:
      requested: {{ entity: request }}
      matched: {{ entity: match }}
    when:
      - "job.status == 'open'"
      - "job.postedAt >= day(now - 30 * 86400)"
      - "{SCORE} >= 3000"
    values:
      GSI1PK: "'seeker#' + seekerId"
      GSI1SK: "'j#R' + string({level}) + '#' + job.postedAt + '#' + jobId"
      relevance: "{level}"
      score: "{SCORE}"
      generatedAt: "iso(now)"
    ttl: "now + 604800"
    volatile: [generatedAt, ttl]
once:
  matches:
    on: request
    when: "status == 'approved'"
    key: "${{seekerId}}#${{jobId}}"
    require:
      - {{ entity: request, with: {{ city: city, jobId: jobId, seekerId: seekerId }}, equals: {{ status: "'approved'" }} }}
      - {{ entity: job, with: {{ city: city, jobId: jobId }}, message: "the job is gone" }}
      - {{ entity: seeker, with: {{ city: city, seekerId: seekerId }}, message: "the seeker is gone" }}
    put:
      - {{ entity: match, with: {{ city: city, jobId: jobId, seekerId: seekerId, matchedAt: approvedAt }} }}
    delete:
      - {{ entity: suggestion, with: {{ city: city, jobId: jobId, seekerId: seekerId }} }}
"#
    )
}

fn ss(v: &[&str]) -> AttributeValue {
    AttributeValue::Ss(v.iter().map(|s| s.to_string()).collect())
}

/// Today (UTC), as jobs are posted.
fn today() -> String {
    chrono::Utc::now().date_naive().to_string()
}

fn job(id: &str, status: &str, skills: &[&str]) -> Item {
    job_posted(id, status, skills, &today())
}

fn job_posted(id: &str, status: &str, skills: &[&str], posted: &str) -> Item {
    attrs(vec![
        ("PK", s("CITY#mtl")),
        ("SK", s(format!("JOB#{id}"))),
        ("type", s("job")),
        ("status", s(status)),
        ("skills", ss(skills)),
        ("salaryMax", n(120)),
        ("category", s("tech")),
        ("postedAt", s(posted)),
    ])
}

fn seeker(id: &str, skills: &[&str], salary: i64) -> Item {
    attrs(vec![
        ("PK", s("CITY#mtl")),
        ("SK", s(format!("SEEKER#{id}"))),
        ("type", s("seeker")),
        ("skills", ss(skills)),
        ("desiredSalary", n(salary)),
        ("categories", ss(&["tech"])),
    ])
}

fn request(job: &str, seeker: &str, status: &str) -> Item {
    let mut i = attrs(vec![
        ("PK", s("CITY#mtl")),
        ("SK", s(format!("REQ#{job}#{seeker}"))),
        ("type", s("request")),
        ("status", s(status)),
    ]);
    if status == "approved" {
        i.insert("approvedAt".into(), s("2026-11-03T10:00:00Z"));
    }
    i
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_suggestions_follow_relevance_requests_matches_and_closing() {
    let file = temp_model("board", &board_yaml());
    let mut env = model_env("board", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    put(rt, seeker("a", &["aws", "rust"], 100)).await;
    put(rt, seeker("b", &["cobol"], 500)).await;
    put(rt, seeker("c", &["rust"], 100)).await;
    put(rt, job("j1", "open", &["aws", "rust"])).await;
    rt.drain().await.expect("drain");
    let sug = partition(rt, "SUG#mtl").await;
    // a: 6000 + 2500 + 1500; b: 0 + 0 + 1500 (below R3); c: 3000 + 2500 + 1500.
    assert_eq!(sks(&sug), ["S#j1#a", "S#j1#c"], "none below R3");
    assert_eq!(sug[0]["score"], n(10000));
    assert_eq!(sug[0]["relevance"], n(1));
    assert_eq!(sug[0]["GSI1PK"], s("seeker#a"));
    assert_eq!(sug[0]["GSI1SK"], s(format!("j#R1#{}#j1", today())));
    assert_eq!(sug[1]["relevance"], n(2));
    let (generated, ttl) = (sug[0]["generatedAt"].clone(), sug[0]["ttl"].clone());
    // A rescoring to the same score: kept, its TTL not extended (the clock
    // moves past a second first, so a rewrite would show).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    put(rt, seeker("a", &["aws", "rust"], 110)).await;
    rt.drain().await.expect("drain");
    let sug = partition(rt, "SUG#mtl").await;
    assert_eq!(sug[0]["generatedAt"], generated, "not rewritten");
    assert_eq!(sug[0]["ttl"], ttl, "its life not extended");
    // The level changes: the same item moves in GSI1.
    put(rt, seeker("a", &["aws"], 110)).await;
    rt.drain().await.expect("drain");
    let sug = partition(rt, "SUG#mtl").await;
    assert_eq!(sug[0]["relevance"], n(2), "3000 + 2500 + 1500");
    assert_eq!(sug[0]["GSI1SK"], s(format!("j#R2#{}#j1", today())));
    // A request takes the pair out; its approval makes a match, and the
    // request's removal does not bring the suggestion back (matched).
    put(rt, request("j1", "a", "pending")).await;
    rt.drain().await.expect("drain");
    assert_eq!(sks(&partition(rt, "SUG#mtl").await), ["S#j1#c"]);
    put(rt, request("j1", "a", "approved")).await;
    rt.drain().await.expect("drain");
    delete(rt, key("CITY#mtl", "REQ#j1#a")).await;
    rt.drain().await.expect("drain");
    assert_eq!(
        sks(&partition(rt, "SUG#mtl").await),
        ["S#j1#c"],
        "matched: never suggested"
    );
    // c approved directly (no request before): the match deletes its
    // suggestion in the same transaction.
    put(rt, request("j1", "c", "approved")).await;
    rt.drain().await.expect("drain");
    assert!(partition(rt, "SUG#mtl").await.is_empty());
    // A job posted 31 days ago is no candidate.
    let old = (chrono::Utc::now() - chrono::Duration::days(31))
        .date_naive()
        .to_string();
    put(rt, job_posted("j0", "open", &["aws", "rust"], &old)).await;
    rt.drain().await.expect("drain");
    assert!(
        partition(rt, "SUG#mtl").await.is_empty(),
        "only the last 30 days"
    );
    // A second job, then closed: its suggestions go.
    put(rt, job("j2", "open", &["cobol"])).await;
    rt.drain().await.expect("drain");
    // b: 6000 + 0 + 1500; a and c: 0 + 2500 + 1500 (their matches are
    // of j1).
    assert_eq!(
        sks(&partition(rt, "SUG#mtl").await),
        ["S#j2#a", "S#j2#b", "S#j2#c"]
    );
    put(rt, job("j2", "closed", &["cobol"])).await;
    rt.drain().await.expect("drain");
    assert!(
        partition(rt, "SUG#mtl").await.is_empty(),
        "closing deletes them"
    );
    assert_eq!(rt.consumer("matches").metrics().get(names::SKIPPED), 0);
    assert_eq!(
        rt.stream_processor("derive")
            .metrics()
            .get(names::BAD_INPUT),
        0
    );
    assert_clean(rt).await;
    env.engine.stop().await;
    let _ = std::fs::remove_dir_all(file.parent().expect("dir"));
}
