//! Scenario files for `jobstream demo` and the integration tests (SPEC §8):
//! the writes an application makes, in order, then the items expected once
//! the processors are done.
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
//! A scenario is a test: [`play_checked`] (`jobstream demo`, the
//! integration tests' runner) also checks, after every step, that `verify`
//! finds no drift and no bad input, that nothing went to a dead-letter
//! queue or an on-failure destination and that no record was refused as
//! bad input, unless the step (or the top level) declares otherwise; after
//! the last step it drains once more (the processors must have reached a
//! fixpoint: no record, no write) and compares `processor_writes:`.
//!
//! ```yaml
//! model: ../my-table.yaml       # what it plays: a model file, or a shipped name
//! writes:
//!   - transact:                 # one TransactWriteItems (up to 100 actions)
//!       - delete: { PK: "ACCOUNT#a-1", SK: "INV#i-1" }
//!       - put: { PK: "ACCOUNT#a-2", SK: "INV#i-1", invoiceId: i-1 }
//! items: 4                      # the table holds exactly 4 items
//! bad_input: 1                  # records refused as bad input so far (carried on)
//! verify:                       # what verify reports (carried on)
//!   bad_input: 1                # items it names as bad input (not drift)
//!   says: ["2 items claim"]     # each found in one of those reports
//!   drift: ["orphans: PK=T#a"]  # this step only: exactly these findings
//! ```

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use crate::item::Item;

mod play;
pub use play::{play, play_checked, play_model, run_query};
#[cfg(test)]
mod tests;

type Map = serde_json::Map<String, serde_json::Value>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The model it plays: a shipped model's name (`NAME` of `models/NAME.yaml`) or a model
    /// file, relative to the scenario file (`../shop.yaml`).
    pub model: Option<String>,
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
    /// How many items the table holds after the writes (all of them:
    /// a stray write is a difference).
    pub items: Option<usize>,
    /// Records refused as bad input so far (default 0; a later step keeps
    /// the last declared count until it declares its own).
    pub bad_input: Option<u64>,
    /// What `verify` reports besides drift (default: nothing; carried on
    /// like `bad_input`).
    pub verify: Option<VerifyCheck>,
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
    pub items: Option<usize>,
    pub bad_input: Option<u64>,
    pub verify: Option<VerifyCheck>,
}

/// What `verify` must report after a step, besides no drift (which is
/// always checked).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyCheck {
    /// How many items it names as bad input (not drift).
    #[serde(default)]
    pub bad_input: usize,
    /// Words each found in one of its bad-input reports.
    #[serde(default)]
    pub says: Vec<String>,
    /// The drift it finds after this step alone (default none; not carried
    /// on): exactly as many findings, each holding one of these words. A
    /// state the scenario passes through on purpose (a member written while
    /// its root is deleted is an orphan until the root comes back).
    #[serde(default)]
    pub drift: Vec<String>,
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
    /// Puts and deletes in one TransactWriteItems (all or none): a move of
    /// an item to another key, as an application makes it.
    Transact(Vec<TransactOp>),
}

/// One action of a `transact` write.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum TransactOp {
    Put(Map),
    Delete(Map),
}

/// The most actions a `transact` may have (DynamoDB's limit).
pub const MAX_TRANSACT: usize = 100;

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
        let mut s: Scenario = super::yaml::read(text)
            .map_err(|e| format!("{origin}:{}:{}: {}", e.line, e.col, e.message))?;
        s.resolve(chrono::Utc::now().timestamp())
            .map_err(|e| format!("{origin}: {e}"))?;
        s.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(s)
    }

    /// Every write well formed (a `repeat` of one put or delete, a
    /// `transact` of 1 to 100 actions); the error names the step, the
    /// write and the field.
    pub fn validate(&self) -> Result<(), String> {
        for (i, step) in self.all_steps().iter().enumerate() {
            for (j, w) in step.writes.iter().enumerate() {
                let at = || format!("{}, write {}", step_name(i), j + 1);
                match w {
                    Write::Repeat(r) => {
                        r.expand().map_err(|e| format!("{}: {e}", at()))?;
                    }
                    Write::Transact(ops) if ops.is_empty() || ops.len() > MAX_TRANSACT => {
                        return Err(format!(
                            "{}: transact: 1 to {MAX_TRANSACT} actions, not {}",
                            at(),
                            ops.len()
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The model `model:` names: a shipped model (a bare name), else a
    /// file relative to the folder of the scenario at `path`.
    pub fn model_source(&self, path: &std::path::Path) -> Option<crate::models::Source> {
        use crate::models::Source;
        let m = self.model.as_deref()?;
        if m.contains('/') || m.ends_with(".yaml") || m.ends_with(".yml") {
            let dir = path.parent().unwrap_or(std::path::Path::new("."));
            Some(Source::File(dir.join(m)))
        } else {
            Some(Source::Name(m.to_string()))
        }
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
                    Write::Transact(ops) => {
                        for op in ops {
                            let (TransactOp::Put(m) | TransactOp::Delete(m)) = op;
                            fix(m);
                        }
                    }
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
            items: self.items,
            bad_input: self.bad_input,
            verify: self.verify.as_ref(),
        }];
        out.extend(self.steps.iter().map(|s| StepRef {
            say: s.say.as_deref(),
            writes: &s.writes,
            expect: &s.expect,
            absent: &s.absent,
            queries: &s.queries,
            items: s.items,
            bad_input: s.bad_input,
            verify: s.verify.as_ref(),
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
    pub items: Option<usize>,
    pub bad_input: Option<u64>,
    pub verify: Option<&'a VerifyCheck>,
}

/// How differences and errors name step `i` of [`Scenario::all_steps`]:
/// the top level is step 0, as `jobstream demo` prints them.
pub fn step_name(i: usize) -> String {
    if i == 0 {
        "step 0 (the top level)".to_string()
    } else {
        format!("step {i}")
    }
}

impl StepRef<'_> {
    /// How differences after step `i` name it: [`step_name`], then its
    /// `say:` when it has one (`step 2 ("a forged value is brought back")`).
    pub fn label(&self, i: usize) -> String {
        match self.say {
            Some(say) => format!("{} ({say:?})", step_name(i)),
            None => step_name(i),
        }
    }

    /// The requests its writes make (a `repeat` counts its rounds, a
    /// `transact` is one).
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
