//! Scenario files for `jobstream demo --model-file` (SPEC §8): the writes an
//! application makes, in order, then the items expected once the processors
//! are done.
//!
//! ```yaml
//! writes:                       # applied in order, one request each
//!   - put: { PK: "ORG#1", SK: "#METADATA", name: Acme, seats: 3 }
//!   - delete: { PK: "ORG#1", SK: "EMP#2" }
//!   - repeat: { times: 3, put: { PK: "ORG#1", SK: "EMP#${i}" } }   # EMP#1..EMP#3
//! expect:                       # these items exist with (at least) these attributes
//!   - { PK: "DEPT#1", SK: "EMP#2", orgId: "1", GSI1PK: null }   # null: absent
//! absent:                       # these keys do not exist
//!   - { PK: "DEPT#9", SK: "EMP#2" }
//! ```
//!
//! Values: a string is `S`, an integer or a decimal `N`, `true`/`false`
//! `BOOL`, `null` `NULL`, a list of strings `SS`, another list `L`, a
//! mapping `M`.
//!
//! A scenario can also run the model's declared queries (`queries:` of the
//! model file) and compare what they return, and go on in `steps` (each
//! with its own writes, expected items and queries, played after the
//! ones above, in order):
//!
//! ```yaml
//! queries:                      # run after the writes; printed by `jobstream demo`
//!   - query: open_jobs
//!     params: { org: 01HXAA0000000000000000000A }
//!     expect:                   # the items in this order, each with (at least) these attributes
//!       - { jobId: 01HXAG0000000000000000000G, title: Rust engineer }
//!   - query: open_jobs
//!     params: { org: 01HXAA0000000000000000000A }
//!     count: 40                 # how many; `expect` then lists the first ones
//! steps:
//!   - say: "the posting closes"
//!     writes: [...]
//!     queries: [...]
//! processor_writes: 23          # the processors' item writes in all
//! ```
//!
//! `jobstream demo` then drains once more: the processors must have reached
//! a fixpoint (no record, no write).

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use super::FileModel;
use crate::item::{display_key, key_of, Item};
use crate::models::{BoxError, Context as _, Harness};

type Map = serde_json::Map<String, serde_json::Value>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Values computed when the scenario is read (CEL over `now`, epoch
    /// seconds, and the vars before): `${name}` in any string of the
    /// scenario is replaced by it (a string that is only `${name}` takes
    /// its type: an int is a number).
    #[serde(default)]
    pub vars: super::raw::Ordered<String>,
    #[serde(default)]
    pub writes: Vec<Write>,
    #[serde(default)]
    pub expect: Vec<Map>,
    #[serde(default)]
    pub absent: Vec<Map>,
    /// The model's queries to run after the writes, with what they return.
    #[serde(default)]
    pub queries: Vec<ScenarioQuery>,
    /// More steps, played in order after the above.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The item writes the processors make in all (checked by `jobstream
    /// demo`): what the model costs, pinned.
    pub processor_writes: Option<u64>,
}

/// One step of a scenario: what it says, its writes, the items then
/// expected, the queries then run.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub say: Option<String>,
    #[serde(default)]
    pub writes: Vec<Write>,
    #[serde(default)]
    pub expect: Vec<Map>,
    #[serde(default)]
    pub absent: Vec<Map>,
    #[serde(default)]
    pub queries: Vec<ScenarioQuery>,
}

/// A declared query run by a scenario: its parameters, and (optionally) the
/// items it must return, in order, each with at least these attributes
/// (`null`: absent).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioQuery {
    pub query: String,
    #[serde(default)]
    pub params: Map,
    pub expect: Option<Vec<Map>>,
    /// How many items it returns; with it, `expect` lists the first ones.
    pub count: Option<usize>,
}

impl ScenarioQuery {
    /// The parameters as `param=value` text (YAML numbers and booleans as
    /// written).
    pub fn args(&self) -> Vec<(String, String)> {
        self.params
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect()
    }

    /// `name(p=v, ...)` for titles.
    pub fn title(&self) -> String {
        let args: Vec<String> = self
            .args()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}({})", self.query, args.join(", "))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum Write {
    Put(serde_json::Map<String, serde_json::Value>),
    Delete(serde_json::Map<String, serde_json::Value>),
    /// One put or delete `times` times, `${i}` (1, 2, ...) in its strings
    /// replaced by the round's number: a celebrity's thousand followers, a
    /// burst of likes.
    Repeat(Repeat),
}

/// `repeat: { times: 150, put: { PK: "u#fan${i}#following", ... } }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    pub times: u32,
    pub put: Option<Map>,
    pub delete: Option<Map>,
}

/// The most rounds a `repeat` may have.
pub const MAX_REPEAT: u32 = 100_000;

impl Repeat {
    /// The writes, each round's `${i}` in place; an error when it is not
    /// exactly one put or one delete, or too many rounds.
    pub fn expand(&self) -> Result<Vec<Write>, String> {
        if self.times == 0 || self.times > MAX_REPEAT {
            return Err(format!("repeat: `times` is 1..={MAX_REPEAT}"));
        }
        let (m, put) = match (&self.put, &self.delete) {
            (Some(m), None) => (m, true),
            (None, Some(m)) => (m, false),
            _ => return Err("repeat: one `put` or one `delete`".to_string()),
        };
        Ok((1..=self.times)
            .map(|i| {
                let mut m = m.clone();
                substitute_map(
                    &mut m,
                    &[("i".to_string(), super::expr::Val::Int(i64::from(i)))],
                );
                if put {
                    Write::Put(m)
                } else {
                    Write::Delete(m)
                }
            })
            .collect())
    }
}

/// A YAML value as a DynamoDB attribute.
pub fn attr(v: &serde_json::Value) -> AttributeValue {
    use serde_json::Value as J;
    match v {
        J::String(s) => AttributeValue::S(s.clone()),
        J::Number(n) => AttributeValue::N(n.to_string()),
        J::Bool(b) => AttributeValue::Bool(*b),
        J::Null => AttributeValue::Null(true),
        J::Array(a) if !a.is_empty() && a.iter().all(|v| v.is_string()) => AttributeValue::Ss(
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        ),
        J::Array(a) => AttributeValue::L(a.iter().map(attr).collect()),
        J::Object(m) => AttributeValue::M(item(m)),
    }
}

/// A YAML mapping as an item.
pub fn item(m: &serde_json::Map<String, serde_json::Value>) -> Item {
    m.iter().map(|(k, v)| (k.clone(), attr(v))).collect()
}

impl Scenario {
    /// Reads a scenario file; errors name the line and column.
    pub fn read(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// A scenario from its text; `origin` (a path) prefixes every error.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut s: Scenario = serde_saphyr::from_str(text).map_err(|e| {
            let (l, c) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            let msg = e.without_snippet().to_string();
            format!(
                "{origin}:{l}:{c}: {}",
                msg.lines().next().unwrap_or("invalid scenario")
            )
        })?;
        s.resolve(chrono::Utc::now().timestamp())
            .map_err(|e| format!("{origin}: {e}"))?;
        Ok(s)
    }

    /// Computes `vars` at `now` (epoch seconds) and puts them in place.
    pub fn resolve(&mut self, now: i64) -> Result<(), String> {
        use super::expr::{Env, Expr, Val};
        if self.vars.0.is_empty() {
            return Ok(());
        }
        let env = Env::new()?;
        let mut vals: Vec<(String, Val)> = vec![("now".into(), Val::Int(now))];
        for (name, src) in &self.vars.0 {
            let e =
                Expr::compile(src).map_err(|e| format!("vars: {name}: `{src}`: {}", e.message))?;
            let v = env
                .eval(&e, |n| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v))
                .map_err(|e| format!("vars: {name}: {e}"))?;
            vals.push((name.clone(), v));
        }
        let vals = &vals[1..];
        let fix = |m: &mut Map| substitute_map(m, vals);
        let fix_step = |writes: &mut Vec<Write>,
                        expect: &mut Vec<Map>,
                        absent: &mut Vec<Map>,
                        queries: &mut Vec<ScenarioQuery>| {
            for w in writes.iter_mut() {
                match w {
                    Write::Put(m) | Write::Delete(m) => fix(m),
                    Write::Repeat(r) => r.put.iter_mut().chain(r.delete.iter_mut()).for_each(fix),
                }
            }
            expect.iter_mut().chain(absent.iter_mut()).for_each(fix);
            for q in queries.iter_mut() {
                fix(&mut q.params);
                q.expect.iter_mut().flatten().for_each(fix);
            }
        };
        fix_step(
            &mut self.writes,
            &mut self.expect,
            &mut self.absent,
            &mut self.queries,
        );
        for st in &mut self.steps {
            fix_step(
                &mut st.writes,
                &mut st.expect,
                &mut st.absent,
                &mut st.queries,
            );
        }
        Ok(())
    }
}

fn substitute_map(m: &mut Map, vals: &[(String, super::expr::Val)]) {
    for v in m.values_mut() {
        substitute(v, vals);
    }
}

/// `${name}` of a var in a value: a string that is only that takes the
/// var's type; inside a longer string, its text.
fn substitute(v: &mut serde_json::Value, vals: &[(String, super::expr::Val)]) {
    use super::expr::Val;
    use serde_json::Value as J;
    match v {
        J::String(s) if s.contains("${") => {
            for (name, val) in vals {
                let hole = format!("${{{name}}}");
                if *s == hole {
                    *v = match val {
                        Val::Int(i) => J::from(*i),
                        Val::Bool(b) => J::Bool(*b),
                        other => J::String(other.render()),
                    };
                    return;
                }
                if s.contains(&hole) {
                    *s = s.replace(&hole, &val.render());
                }
            }
        }
        J::Array(a) => a.iter_mut().for_each(|v| substitute(v, vals)),
        J::Object(m) => substitute_map(m, vals),
        _ => {}
    }
}

impl Scenario {
    /// The top-level step, then `steps`, in play order.
    pub fn all_steps(&self) -> Vec<StepRef<'_>> {
        let mut out = vec![StepRef {
            say: None,
            writes: &self.writes,
            expect: &self.expect,
            absent: &self.absent,
            queries: &self.queries,
        }];
        out.extend(self.steps.iter().map(|s| StepRef {
            say: s.say.as_deref(),
            writes: &s.writes,
            expect: &s.expect,
            absent: &s.absent,
            queries: &s.queries,
        }));
        out
    }

    /// Every query the scenario runs.
    pub fn query_count(&self) -> usize {
        self.all_steps().iter().map(|s| s.queries.len()).sum()
    }
}

/// A step, borrowed (the top level is one too).
#[derive(Debug, Clone, Copy)]
pub struct StepRef<'a> {
    pub say: Option<&'a str>,
    pub writes: &'a [Write],
    pub expect: &'a [Map],
    pub absent: &'a [Map],
    pub queries: &'a [ScenarioQuery],
}

impl StepRef<'_> {
    /// The requests its writes make (a `repeat` counts its rounds).
    pub fn write_count(&self) -> usize {
        self.writes
            .iter()
            .map(|w| match w {
                Write::Repeat(r) => r.times as usize,
                _ => 1,
            })
            .sum()
    }
}

/// Plays every step (writes in order, drain), then returns what differs
/// from `expect` and `absent`; its queries need the model file and are not
/// run here ([`play_model`] runs them).
pub async fn play(
    h: &mut dyn Harness,
    s: &Scenario,
    key_names: &[&str],
) -> Result<Vec<String>, BoxError> {
    let mut diffs = Vec::new();
    for step in s.all_steps() {
        diffs.extend(play_step(h, &step, key_names).await?);
    }
    Ok(diffs)
}

/// Plays every step and runs its queries through `m`'s declarations,
/// printing each query's items (`print`); returns every difference.
pub async fn play_model(
    h: &mut dyn Harness,
    s: &Scenario,
    m: &FileModel,
    print: bool,
) -> Result<Vec<String>, BoxError> {
    let keys = m.key_names();
    let mut diffs = Vec::new();
    for (i, step) in s.all_steps().into_iter().enumerate() {
        if print {
            if let Some(say) = step.say {
                println!("\n== step {i}: {say}");
            }
        }
        diffs.extend(play_step(h, &step, &keys).await?);
        for q in step.queries {
            diffs.extend(run_query(h, m, q, print).await?);
        }
    }
    Ok(diffs)
}

/// Items a demo prints of one query (the rest are counted).
const SHOWN: usize = 12;

/// Runs one scenario query; its differences from `expect`.
pub async fn run_query(
    h: &mut dyn Harness,
    m: &FileModel,
    q: &ScenarioQuery,
    print: bool,
) -> Result<Vec<String>, BoxError> {
    use super::query_run;
    let title = q.title();
    let bound = match query_run::bind(m, &q.query, &q.args()) {
        Ok(b) => b,
        Err(e) => return Ok(vec![format!("query {title}: {e}")]),
    };
    let table = h.table().to_string();
    let out = query_run::run(h.dynamodb(), &table, &bound, None).await?;
    if print {
        let about = query_run::find(m, &q.query)
            .ok()
            .and_then(|d| d.about.clone())
            .map(|a| format!("  ({a})"))
            .unwrap_or_default();
        println!("\nquery {title}{about}");
        if let Ok(d) = query_run::find(m, &q.query) {
            let shown = out.items.len().min(SHOWN);
            println!("{}", query_run::render(m, d, &out.items[..shown]));
            if out.items.len() > shown {
                println!("... and {} more", out.items.len() - shown);
            }
        }
        if out.items.is_empty() {
            println!("(no items)");
        }
    }
    let mut diffs = Vec::new();
    if let Some(n) = q.count {
        if n != out.items.len() {
            diffs.push(format!(
                "query {title}: {} item(s), expected {n}",
                out.items.len()
            ));
        }
    } else if print {
        println!("({} item(s))", out.items.len());
    }
    let Some(want) = &q.expect else {
        return Ok(diffs);
    };
    // With `count`, `expect` lists the first items; without, all of them.
    if q.count.is_none() && want.len() != out.items.len() {
        diffs.push(format!(
            "query {title}: {} item(s), expected {}",
            out.items.len(),
            want.len()
        ));
    }
    for (n, (w, got)) in want.iter().map(item).zip(&out.items).enumerate() {
        for (a, v) in &w {
            let absent = matches!(v, AttributeValue::Null(_)) && !got.contains_key(a);
            if !absent && got.get(a) != Some(v) {
                diffs.push(format!(
                    "query {title}: item {}: `{a}` is {}, expected {}",
                    n + 1,
                    query_run::cell(got.get(a)),
                    query_run::cell(Some(v))
                ));
            }
        }
    }
    Ok(diffs)
}

/// One step: the writes in order, a drain, then the expected and absent
/// items read back.
async fn play_step(
    h: &mut dyn Harness,
    s: &StepRef<'_>,
    key_names: &[&str],
) -> Result<Vec<String>, BoxError> {
    let table = h.table().to_string();
    let mut written = 0usize;
    for w in s.writes {
        let expanded;
        let writes: &[Write] = match w {
            Write::Repeat(r) => {
                expanded = r.expand().map_err(crate::models::Failed)?;
                &expanded
            }
            one => std::slice::from_ref(one),
        };
        for w in writes {
            written += 1;
            match w {
                Write::Put(m) => {
                    let it = item(m);
                    let what = format!(
                        "scenario write {written} (put {})",
                        display_key(&key_of(&it, key_names))
                    );
                    h.dynamodb()
                        .put_item()
                        .table_name(&table)
                        .set_item(Some(it))
                        .send()
                        .await
                        .context(&what)?;
                }
                Write::Delete(m) => {
                    let key = key_of(&item(m), key_names);
                    let what = format!("scenario write {written} (delete {})", display_key(&key));
                    h.dynamodb()
                        .delete_item()
                        .table_name(&table)
                        .set_key(Some(key))
                        .send()
                        .await
                        .context(&what)?;
                }
                // `expand` gives puts and deletes only.
                Write::Repeat(_) => {}
            }
        }
    }
    h.drain().await?;
    let mut diffs = Vec::new();
    for want in s.expect.iter().map(item) {
        let key = key_of(&want, key_names);
        let got = h
            .dynamodb()
            .get_item()
            .table_name(&table)
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .context("scenario read")?
            .item;
        match got {
            None => diffs.push(format!("missing: {}", display_key(&key))),
            Some(got) => {
                for (a, v) in &want {
                    // `null` expects the attribute absent (a sparse index).
                    let absent = matches!(v, AttributeValue::Null(_)) && !got.contains_key(a);
                    if !absent && got.get(a) != Some(v) {
                        diffs.push(format!(
                            "{}: `{a}` is {}, expected {}",
                            display_key(&key),
                            super::query_run::shown(got.get(a)),
                            super::query_run::shown(Some(v))
                        ));
                    }
                }
            }
        }
    }
    for gone in s.absent.iter().map(item) {
        let key = key_of(&gone, key_names);
        let got = h
            .dynamodb()
            .get_item()
            .table_name(&table)
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .context("scenario read")?
            .item;
        if got.is_some() {
            diffs.push(format!("present, expected absent: {}", display_key(&key)));
        }
    }
    Ok(diffs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_values_map_to_attributes() {
        let s: Scenario = serde_saphyr::from_str(
            "writes:\n  - put: { PK: a, SK: b, n: 3, ok: true, tags: [a, b], gone: null }\n  - delete: { PK: a, SK: b }\nexpect:\n  - { PK: a, SK: c, count: 2 }\n",
        )
        .unwrap();
        assert_eq!(s.writes.len(), 2);
        let Write::Put(m) = &s.writes[0] else {
            panic!("a put")
        };
        let i = item(m);
        assert_eq!(i["n"], AttributeValue::N("3".into()));
        assert_eq!(i["ok"], AttributeValue::Bool(true));
        assert_eq!(i["tags"], AttributeValue::Ss(vec!["a".into(), "b".into()]));
        assert_eq!(i["gone"], AttributeValue::Null(true));
        assert_eq!(item(&s.expect[0])["count"], AttributeValue::N("2".into()));
    }

    #[test]
    fn unknown_write_kinds_are_errors() {
        assert!(serde_saphyr::from_str::<Scenario>("writes:\n  - upsert: { PK: a }\n").is_err());
    }

    #[test]
    fn steps_and_queries_parse() {
        let s: Scenario = serde_saphyr::from_str(
            "writes:\n  - put: { PK: a, SK: b }\nqueries:\n  - query: q\n    params: { org: 01HX, n: 3 }\n    expect:\n      - { SK: b }\nsteps:\n  - say: later\n    writes:\n      - delete: { PK: a, SK: b }\n    queries:\n      - { query: q, expect: [] }\n",
        )
        .unwrap();
        let steps = s.all_steps();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[1].say, Some("later"));
        assert_eq!(s.query_count(), 2);
        // Parameters in name order (a JSON map).
        assert_eq!(s.queries[0].title(), "q(n=3, org=01HX)");
        assert_eq!(
            s.queries[0].args(),
            [
                ("n".to_string(), "3".to_string()),
                ("org".to_string(), "01HX".to_string())
            ]
        );
        assert!(serde_saphyr::from_str::<Scenario>("steps:\n  - sey: x\n").is_err());
    }

    #[test]
    fn vars_are_computed_from_now_and_put_in_place() {
        let mut s: Scenario = serde_saphyr::from_str(
            "vars:\n  t: \"iso(now - 60)\"\n  ttl: \"epoch(t) + 604800\"\nwrites:\n  - put: { PK: \"p#${t}\", SK: b, at: \"${t}\", ttl: \"${ttl}\" }\nsteps:\n  - queries:\n      - { query: q, params: { since: \"${t}\" }, expect: [{ ttl: \"${ttl}\" }] }\n",
        )
        .unwrap();
        s.resolve(1_767_600_060).unwrap();
        let Write::Put(m) = &s.writes[0] else {
            panic!("a put")
        };
        let i = item(m);
        assert_eq!(i["PK"], AttributeValue::S("p#2026-01-05T08:00:00Z".into()));
        assert_eq!(i["at"], AttributeValue::S("2026-01-05T08:00:00Z".into()));
        assert_eq!(i["ttl"], AttributeValue::N("1768204800".into()));
        let q = &s.steps[0].queries[0];
        assert_eq!(
            q.args(),
            [("since".to_string(), "2026-01-05T08:00:00Z".to_string())]
        );
        let want = item(&q.expect.as_ref().unwrap()[0]);
        assert_eq!(want["ttl"], AttributeValue::N("1768204800".into()));
        let mut bad: Scenario = serde_saphyr::from_str("vars:\n  t: \"nope(now)\"\n").unwrap();
        assert!(bad.resolve(0).is_err());
    }

    #[test]
    fn a_repeat_expands_to_numbered_writes() {
        let s: Scenario = serde_saphyr::from_str(
            "writes:\n  - repeat: { times: 3, put: { PK: \"u#fan${i}#following\", SK: \"u#star\", n: \"${i}\" } }\n  - repeat: { times: 2, put: { PK: a }, delete: { PK: a } }\n  - repeat: { times: 0, delete: { PK: a } }\n",
        )
        .unwrap();
        let Write::Repeat(r) = &s.writes[0] else {
            panic!("a repeat")
        };
        let w = r.expand().unwrap();
        assert_eq!(w.len(), 3);
        let Write::Put(m) = &w[2] else {
            panic!("a put")
        };
        let i = item(m);
        assert_eq!(i["PK"], AttributeValue::S("u#fan3#following".into()));
        assert_eq!(
            i["n"],
            AttributeValue::N("3".into()),
            "only `${{i}}`: a number"
        );
        for bad in &s.writes[1..] {
            let Write::Repeat(r) = bad else {
                panic!("a repeat")
            };
            assert!(r.expand().is_err());
        }
    }
}
