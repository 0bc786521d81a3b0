//! Join set jobs: a set job declared as data (SPEC §7, §8 `sets:`).
//!
//! An item of the set (the *target*) exists iff every named fact exists, is
//! valid and `when` holds, and no `unless` fact exists (an anti-join); its
//! attributes come from the facts. The declaration is plain data
//! ([`JoinSet`]): key templates with variables (`u#${f}#timeline`), the
//! facts by key template, the values, the TTL, the page size. A Rust model
//! fills it in code; a model file's `sets:` block maps onto the same structs
//! (its CEL expressions become [`Value::Computed`] / [`When::Expr`]).
//!
//! **Scopes are derived from the key templates** ([`JoinSet::scopes`]): a
//! job is started for one fact that changed (its key binds some variables);
//! the other variables of the target are listed from the partition of
//! another fact whose partition key those variables bind (or from its
//! `via` listing, e.g. a follower mirror keyed by the followed user), and,
//! when the target's own partition is bound, by sweeping the target's
//! partition for items of the scope (so targets whose facts are gone are
//! found too). The listings are **paged** together (at most
//! [`JoinSet::page`] candidates per message: a small scope is one message);
//! the next page is enqueued *before* this page's writes ([`Plan::ahead`]),
//! so the pages of a large scope are written concurrently and each
//! message's work stays bounded. A job that fails after sending its next
//! page sends it again when redelivered: that duplicate tail of pages finds
//! its writes done (reads only), one extra tail per failed delivery.
//!
//! **Every write is guarded by the facts it was computed from**
//! ([`Guard`]): a put by each fact existing (with the attributes the values
//! read, as read) and each `unless` fact absent; a delete by the fact whose
//! absence (or the `unless` fact whose presence) justifies it, preferring
//! the scope's own fact (one check shared by the whole transaction chunk),
//! or, when only `when`/the TTL says no, by the attributes as read. A late
//! or duplicated job therefore never resurrects nor wipes: its guard fails,
//! the write is dropped, and the newer fact's own job fixes the scope.
//!
//! A fact that exists but is not valid is bad input: the target keeps what
//! earlier valid states implied (nothing is written for it). A target past
//! its TTL is DynamoDB's to delete (never listed, never written).
//!
//! ## A model file's `sets:` block (for the loader)
//!
//! ```yaml
//! sets:
//!   timeline:                         # JoinSet.name; queue: the consumer's
//!     entity: timeline                # TargetDecl.key from the entity's key template,
//!                                     # type_attr from the table's entity-type attribute
//!     facts:                          # FactDecl, in order (guards follow this order)
//!       follow: { entity: follow, bind: { follower: f, followed: a }, via: follower }
//!       post:   { entity: post, bind: { author: a, postId: p } }
//!     unless: {}                      # UnlessDecl: entity + bindings, existence only
//!     when: [ "f != a" ]              # When::Expr (CEL; When::Distinct for a plain `!=`)
//!     values:                         # Value::Var / Value::Attr / Value::Computed (CEL)
//!       postId: p
//!       authorId: a
//!       createdAt: post.createdAt
//!     ttl: "epoch(post.createdAt) + 604800"   # TargetDecl.ttl, with the table's TTL attribute
//!     page: 1000                      # optional; DEFAULT_PAGE
//! ```
//!
//! A fact's entity gives its key template (bindings rename the entity's
//! variables to the set's), its validation ([`FactDecl::valid`]: the
//! entity's types and `check`s) and `via` (another entity whose key binds
//! the same variables, e.g. a processor mirror). [`FactDecl::reads`] are the
//! attributes the file's `when`/values/ttl mention for that fact (the loader
//! collects them from the compiled expressions). Names that must be
//! `'static` (set, queue, attributes) are leaked once at load. The scopes
//! need no declaration: [`JoinSet::scopes`] derives them and refuses a set
//! whose changes cannot be listed (report it as `PATH:LINE:COL`). The stream
//! side starts a scope with [`JoinSet::start`] (`starts:` of the fact's
//! entity: the fact's variables as `bind`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};

use super::rules::OutMessage;
use super::setjob::{BoxFut, Guard, Guarded, Plan, Reads, SetJob};
use crate::item::{s, Item, ItemExt};
use crate::ledger::item_id;
use crate::sqs::MessageError;

/// Variable bindings: name -> value (a value never contains `#`).
pub type Vars = BTreeMap<String, String>;

/// One piece of a key template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Var(String),
}

/// A key attribute's template: literal text and `${var}` variables, e.g.
/// `u#${f}#timeline`. Templates parse back: a variable's value is non-empty
/// and contains no `#`, and two variables are never adjacent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(pub Vec<Part>);

/// Why a declaration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclError {
    #[error("template `{template}`: {reason}")]
    Template { template: String, reason: String },
    #[error("set `{set}`: {reason}")]
    Set { set: String, reason: String },
}

/// Variable names as a user writes them: `` `f`, `a` `` (none: `nothing`).
pub fn var_names<'a>(vars: impl IntoIterator<Item = &'a str>) -> String {
    let out: Vec<String> = vars.into_iter().map(|v| format!("`{v}`")).collect();
    if out.is_empty() {
        "nothing".to_string()
    } else {
        out.join(", ")
    }
}

/// A variable's value can be part of a key.
pub fn valid_var_value(v: &str) -> bool {
    !v.is_empty() && v.len() <= 1024 && !v.contains('#')
}

impl Template {
    /// Parses `u#${f}#timeline`.
    pub fn parse(text: &str) -> Result<Self, DeclError> {
        let err = |reason: &str| DeclError::Template {
            template: text.to_string(),
            reason: reason.to_string(),
        };
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find("${") {
                Some(0) => {
                    let end = rest.find('}').ok_or_else(|| err("unclosed `${`"))?;
                    let name = &rest[2..end];
                    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                        return Err(err("a variable name is letters, digits and `_`"));
                    }
                    if matches!(parts.last(), Some(Part::Var(_))) {
                        return Err(err("two variables must be separated by literal text"));
                    }
                    parts.push(Part::Var(name.to_string()));
                    rest = &rest[end + 1..];
                }
                Some(i) => {
                    parts.push(Part::Lit(rest[..i].to_string()));
                    rest = &rest[i..];
                }
                None => {
                    parts.push(Part::Lit(rest.to_string()));
                    rest = "";
                }
            }
        }
        for w in parts.windows(2) {
            if let [Part::Var(_), Part::Lit(l)] = w {
                if !l.starts_with('#') {
                    return Err(err("the text after a variable must start with `#`"));
                }
            }
        }
        Ok(Self(parts))
    }

    /// The variables, in order.
    pub fn vars(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v.as_str()),
            Part::Lit(_) => None,
        })
    }

    /// The value with `vars` substituted; `None` if one is unbound.
    pub fn render(&self, vars: &Vars) -> Option<String> {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Part::Lit(l) => out.push_str(l),
                Part::Var(v) => out.push_str(vars.get(v)?),
            }
        }
        Some(out)
    }

    /// Reads `value` back, binding its variables into `vars`; a variable
    /// already bound must have the same value. `false`: no match.
    pub fn read(&self, value: &str, vars: &mut Vars) -> bool {
        let mut rest = value;
        let mut bound = Vec::new();
        for (i, p) in self.0.iter().enumerate() {
            match p {
                Part::Lit(l) => match rest.strip_prefix(l.as_str()) {
                    Some(r) => rest = r,
                    None => return false,
                },
                Part::Var(name) => {
                    let end = match self.0.get(i + 1) {
                        Some(Part::Lit(next)) => match rest.find(next.as_str()) {
                            Some(e) => e,
                            None => return false,
                        },
                        _ => rest.len(),
                    };
                    let v = &rest[..end];
                    if !valid_var_value(v) {
                        return false;
                    }
                    bound.push((name, v));
                    rest = &rest[end..];
                }
            }
        }
        if !rest.is_empty() {
            return false;
        }
        for (name, v) in &bound {
            if vars.get(*name).is_some_and(|old| old != v) {
                return false;
            }
        }
        for (name, v) in bound {
            vars.insert(name.clone(), v.to_string());
        }
        true
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.0 {
            match p {
                Part::Lit(l) => write!(f, "{l}")?,
                Part::Var(v) => write!(f, "${{{v}}}")?,
            }
        }
        Ok(())
    }
}

/// The templates of an item's partition and sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    pub pk: Template,
    pub sk: Template,
}

impl KeyTemplate {
    pub fn parse(pk: &str, sk: &str) -> Result<Self, DeclError> {
        Ok(Self {
            pk: Template::parse(pk)?,
            sk: Template::parse(sk)?,
        })
    }

    pub fn vars(&self) -> BTreeSet<&str> {
        self.pk.vars().chain(self.sk.vars()).collect()
    }

    /// The key item (`names` = partition and sort key attribute names).
    pub fn key(&self, names: &[&str], vars: &Vars) -> Option<Item> {
        Some(
            [
                (names[0].to_string(), s(self.pk.render(vars)?)),
                (names[1].to_string(), s(self.sk.render(vars)?)),
            ]
            .into(),
        )
    }

    /// Reads an item's key back into `vars` (agreeing with those bound).
    pub fn read(&self, names: &[&str], item: &Item, vars: &mut Vars) -> bool {
        let (Ok(pk), Ok(sk)) = (item.s(names[0]), item.s(names[1])) else {
            return false;
        };
        let mut v = vars.clone();
        if self.pk.read(pk, &mut v) && self.sk.read(sk, &mut v) {
            *vars = v;
            true
        } else {
            false
        }
    }
}

/// Whether an item read at a fact's key is a valid fact (`Err`: why not;
/// bad input, what the fact implied before stays).
pub type Validate = Arc<dyn Fn(&Item) -> Result<(), String> + Send + Sync>;

/// A fact of the join: an item that must exist and be valid.
#[derive(Clone)]
pub struct FactDecl {
    pub name: String,
    pub key: KeyTemplate,
    /// An item that lists this fact by another partition (a processor
    /// mirror: `u#${a}#follower`/`u#${f}` lists the follows of `a`). Only
    /// used to find candidates; the fact itself is always read.
    pub via: Option<KeyTemplate>,
    /// `Some(index)`: the `via` listing is the ledger index
    /// `<index>#<rendered via pk>` (members: rendered via sk), kept exactly
    /// by the engine from [`super::rules::Rules::memberships`] and read
    /// consistently (where a GSI of the same keys may lag), not the table.
    pub via_ledger: Option<String>,
    pub valid: Validate,
    /// The attributes `when` and the values read: guarded equal to what was
    /// read. A fact without any is guarded by its existence.
    pub reads: Vec<&'static str>,
}

impl fmt::Debug for FactDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactDecl")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("via", &self.via)
            .field("via_ledger", &self.via_ledger)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

/// A fact whose existence excludes the target (anti-join).
#[derive(Debug, Clone)]
pub struct UnlessDecl {
    pub name: String,
    pub key: KeyTemplate,
}

/// What a row of the join offers expressions: the variables, the valid
/// facts' items by name, the job's clock.
pub struct Row<'a> {
    pub vars: &'a Vars,
    pub facts: &'a BTreeMap<&'a str, &'a Item>,
    pub now: DateTime<Utc>,
}

/// A computed value (a model file's CEL expression, a Rust closure).
pub type Compute = Arc<dyn Fn(&Row<'_>) -> Result<AttributeValue, String> + Send + Sync>;
/// A computed condition.
pub type Predicate = Arc<dyn Fn(&Row<'_>) -> Result<bool, String> + Send + Sync>;

/// A target attribute's value.
#[derive(Clone)]
pub enum Value {
    /// A variable, as a string.
    Var(String),
    /// A fact's attribute, copied (absent: the row is bad input).
    Attr {
        fact: String,
        attr: String,
    },
    Lit(AttributeValue),
    Computed(Compute),
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Var(v) => write!(f, "Var({v})"),
            Value::Attr { fact, attr } => write!(f, "Attr({fact}.{attr})"),
            Value::Lit(v) => write!(f, "Lit({v:?})"),
            Value::Computed(_) => write!(f, "Computed(..)"),
        }
    }
}

impl Value {
    fn eval(&self, row: &Row<'_>) -> Result<AttributeValue, String> {
        match self {
            Value::Var(v) => row
                .vars
                .get(v)
                .map(s)
                .ok_or_else(|| format!("variable `{v}` is unbound")),
            Value::Attr { fact, attr } => row
                .facts
                .get(fact.as_str())
                .and_then(|i| i.get(attr))
                .cloned()
                .ok_or_else(|| format!("`{fact}.{attr}` is missing")),
            Value::Lit(v) => Ok(v.clone()),
            Value::Computed(f) => f(row),
        }
    }
}

/// A condition of the join (all must hold).
#[derive(Clone)]
pub enum When {
    /// Two variables differ (a user's own posts are not on their timeline).
    Distinct(String, String),
    Expr(Predicate),
}

impl fmt::Debug for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            When::Distinct(a, b) => write!(f, "Distinct({a}, {b})"),
            When::Expr(_) => write!(f, "Expr(..)"),
        }
    }
}

/// The items of the set.
#[derive(Debug, Clone)]
pub struct TargetDecl {
    pub key: KeyTemplate,
    /// The entity type attribute and value stamped on every item.
    pub type_attr: Option<(&'static str, String)>,
    /// Attributes besides the key, in order.
    pub values: Vec<(String, Value)>,
    /// The TTL attribute and its value (epoch seconds): an item is written
    /// only while it is ahead, and an item past it is DynamoDB's.
    pub ttl: Option<(&'static str, Value)>,
}

/// A join set job: the declaration and its consumer.
#[derive(Debug, Clone)]
pub struct JoinSet {
    /// The consumer's name (logs, metrics; the `set` of job bodies).
    pub name: &'static str,
    /// The queue follow-up pages are sent to (the consumer's own).
    pub queue: &'static str,
    /// The table's partition and sort key names.
    pub key_names: &'static [&'static str],
    pub target: TargetDecl,
    pub facts: Vec<FactDecl>,
    pub unless: Vec<UnlessDecl>,
    pub when: Vec<When>,
    /// Attributes that do not make two versions of a target differ.
    pub volatile: &'static [&'static str],
    /// Candidates per message (each listing step is paged by it).
    pub page: usize,
}

/// How a scope finds its candidates, one step after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Page through the partition of fact `fact`'s key (or of its `via`
    /// listing): each item binds the variables the scope lacks.
    List { fact: String, via: bool },
    /// Page through the target's own partition: the targets of the scope
    /// (found even when their facts are gone).
    Sweep,
}

/// The scope a job may be started for: the fact that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The fact (or `unless` fact) that changed.
    pub on: String,
    /// The variables its key binds (the job body's `bind`).
    pub bound: BTreeSet<String>,
    /// Empty: the scope is one candidate.
    pub steps: Vec<Step>,
}

/// The body of a join set job (versioned, see [`crate::engine::body`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinJob {
    pub set: String,
    /// The fact that changed.
    pub scope: String,
    pub bind: Vars,
    /// The listing step and the sort key to continue after (paging).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The job body version this build reads and writes.
pub const VERSION: u64 = 1;
/// Bodies above this size are refused.
pub const MAX_BODY_BYTES: usize = 8 * 1024;

/// BatchGetItem requests of one page in flight at once.
pub const READ_CONCURRENCY: usize = 4;

/// Candidates per message by default: bounded well below a consumer's
/// timeout (1000 entries are about 21 transactions, written concurrently).
pub const DEFAULT_PAGE: usize = 1000;

impl JoinJob {
    pub fn encode(&self) -> String {
        super::body::encode(self, VERSION)
    }

    pub fn decode(body: &str) -> Result<Self, MessageError> {
        Ok(super::body::decode(body, VERSION, MAX_BODY_BYTES)?)
    }
}

fn permanent(reason: impl Into<String>) -> MessageError {
    MessageError::Permanent {
        kind: "InvalidMessage",
        reason: reason.into(),
    }
}

/// A fact as read for one row.
enum State {
    Absent,
    Bad(String),
    Valid,
}

/// What one row (one candidate's variables) implies: the target it should
/// have and the target it has, each with its guards (see [`Plan`]).
pub type Decision = (Option<Guarded>, Option<Guarded>);

impl JoinSet {
    fn set_err(&self, reason: impl Into<String>) -> DeclError {
        DeclError::Set {
            set: self.name.to_string(),
            reason: reason.into(),
        }
    }

    fn fact(&self, name: &str) -> Option<&FactDecl> {
        self.facts.iter().find(|f| f.name == name)
    }

    /// Checks the declaration and derives every scope from the key
    /// templates: one per fact and per `unless` fact.
    pub fn scopes(&self) -> Result<Vec<Scope>, DeclError> {
        let target_vars = self.target.key.vars();
        let mut names = BTreeSet::new();
        for (name, key) in self
            .facts
            .iter()
            .map(|f| (&f.name, &f.key))
            .chain(self.unless.iter().map(|u| (&u.name, &u.key)))
        {
            if !names.insert(name.as_str()) {
                return Err(self.set_err(format!("two facts are named `{name}`")));
            }
            if let Some(v) = key.vars().iter().find(|v| !target_vars.contains(*v)) {
                return Err(self.set_err(format!(
                    "fact `{name}`: variable `{v}` is not in the target's key {}",
                    self.target.key.pk
                )));
            }
        }
        let fact_vars: BTreeSet<&str> = self.facts.iter().flat_map(|f| f.key.vars()).collect();
        if let Some(v) = target_vars.iter().find(|v| !fact_vars.contains(*v)) {
            return Err(self.set_err(format!("target variable `{v}` is bound by no fact")));
        }
        if self.facts.is_empty() {
            return Err(self.set_err("a join set needs at least one fact"));
        }
        let mut scopes = Vec::new();
        for (name, key) in self
            .facts
            .iter()
            .map(|f| (&f.name, &f.key))
            .chain(self.unless.iter().map(|u| (&u.name, &u.key)))
        {
            let bound: BTreeSet<&str> = key.vars();
            let missing: BTreeSet<&str> = target_vars.difference(&bound).copied().collect();
            let mut steps = Vec::new();
            if !missing.is_empty() {
                let lists = |k: &KeyTemplate| {
                    k.pk.vars().all(|v| bound.contains(v))
                        && missing.iter().all(|m| k.vars().contains(m))
                };
                let step = self
                    .facts
                    .iter()
                    .filter(|f| &f.name != name)
                    .find_map(|f| {
                        if lists(&f.key) {
                            Some(Step::List {
                                fact: f.name.clone(),
                                via: false,
                            })
                        } else if f.via.as_ref().is_some_and(lists) {
                            Some(Step::List {
                                fact: f.name.clone(),
                                via: true,
                            })
                        } else {
                            None
                        }
                    })
                    .ok_or_else(|| {
                        self.set_err(format!(
                            "a change of `{name}` binds {}: no fact's partition (nor \
                             its `via` listing) keyed by them lists {}",
                            var_names(bound.iter().copied()),
                            var_names(missing.iter().copied())
                        ))
                    })?;
                steps.push(step);
                if self.target.key.pk.vars().all(|v| bound.contains(v)) {
                    steps.push(Step::Sweep);
                }
            }
            scopes.push(Scope {
                on: name.clone(),
                bound: bound.iter().map(|v| v.to_string()).collect(),
                steps,
            });
        }
        Ok(scopes)
    }

    /// The job body that starts `scope` for the fact whose key binds `bind`.
    pub fn start(&self, scope: &str, bind: Vars) -> String {
        JoinJob {
            set: self.name.to_string(),
            scope: scope.to_string(),
            bind,
            step: 0,
            after: None,
        }
        .encode()
    }

    /// A body's job, checked against the declaration.
    pub fn job(&self, body: &str) -> Result<(JoinJob, Scope), MessageError> {
        let job = JoinJob::decode(body)?;
        self.check_job(job)
    }

    fn check_job(&self, job: JoinJob) -> Result<(JoinJob, Scope), MessageError> {
        if job.set != self.name {
            return Err(permanent(format!(
                "a job of set `{}` sent to `{}`",
                job.set, self.name
            )));
        }
        let scopes = self
            .scopes()
            .map_err(|e| permanent(format!("declaration: {e}")))?;
        let scope = scopes
            .into_iter()
            .find(|s| s.on == job.scope)
            .ok_or_else(|| permanent(format!("no scope `{}`", job.scope)))?;
        let given: BTreeSet<String> = job.bind.keys().cloned().collect();
        if given != scope.bound {
            return Err(permanent(format!(
                "scope `{}` binds {}, the job {}",
                scope.on,
                var_names(scope.bound.iter().map(String::as_str)),
                var_names(given.iter().map(String::as_str))
            )));
        }
        if !job.bind.values().all(|v| valid_var_value(v)) {
            return Err(permanent("a bound value cannot be part of a key"));
        }
        if job.step > 0 && job.step >= scope.steps.len() {
            return Err(permanent(format!("no step {}", job.step)));
        }
        if job.after.as_ref().is_some_and(|a| a.len() > 1024) {
            return Err(permanent("`after` is longer than a sort key"));
        }
        Ok((job, scope))
    }

    /// What one row implies. `read` gives the item at a key as read
    /// consistently (`None`: absent). Pure.
    pub fn decide(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<Decision> {
        self.decide_row(scope, vars, read, now).map(|(d, _)| d)
    }

    /// [`JoinSet::decide`], and whether evaluating `when`, the values or
    /// the TTL failed on valid facts (bad input the stream rules did not
    /// see, e.g. an overflow: counted by the consumer).
    fn decide_row(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<(Decision, bool)> {
        let names = self.key_names;
        let target_key = self.target.key.key(names, vars)?;
        let existing = read(&target_key).filter(|e| !self.expired(e, now));
        let keep = |existing: Option<Item>, bad: bool| {
            let g = existing.map(|item| Guarded {
                item,
                guards: vec![],
            });
            Some(((g.clone(), g), bad))
        };
        let mut items: Vec<(&FactDecl, Item, Option<Item>)> = Vec::new();
        for f in &self.facts {
            let key = f.key.key(names, vars)?;
            let item = read(&key);
            items.push((f, key, item));
        }
        let mut states = Vec::new();
        for (f, _, item) in &items {
            states.push(match item {
                None => State::Absent,
                Some(i) => match (f.valid)(i) {
                    Ok(()) => State::Valid,
                    Err(reason) => State::Bad(reason),
                },
            });
        }
        if let Some(reason) = states.iter().find_map(|s| match s {
            State::Bad(r) => Some(r),
            _ => None,
        }) {
            tracing::debug!(set = self.name, reason = %reason, "a fact is bad input: the target is kept");
            return keep(existing, false);
        }
        let mut unless = Vec::new();
        for u in &self.unless {
            let key = u.key.key(names, vars)?;
            let present = read(&key).is_some();
            unless.push((u, key, present));
        }
        let facts: BTreeMap<&str, &Item> = items
            .iter()
            .filter_map(|(f, _, i)| i.as_ref().map(|i| (f.name.as_str(), i)))
            .collect();
        // The facts as read: a put depends on all of them.
        let as_read = |attrs_only: bool| -> Vec<Guard> {
            let mut g = Vec::new();
            for (f, key, item) in &items {
                if f.reads.is_empty() {
                    if !attrs_only {
                        g.push(Guard::exists(key.clone()));
                    }
                } else {
                    for a in &f.reads {
                        g.push(Guard::same(
                            key.clone(),
                            a,
                            item.as_ref().and_then(|i| i.get(*a)),
                        ));
                    }
                }
            }
            if !attrs_only {
                g.extend(unless.iter().map(|(_, k, _)| Guard::absent(k.clone())));
            }
            g
        };
        let all_valid = states.iter().all(|s| matches!(s, State::Valid));
        let excluded = unless.iter().any(|(_, _, present)| *present);
        let row = Row {
            vars,
            facts: &facts,
            now,
        };
        let desired = if all_valid && !excluded {
            match self.build(&row, &target_key) {
                Ok(Some(item)) => Some(Guarded {
                    item,
                    guards: as_read(false),
                }),
                Ok(None) => None,
                Err(reason) => {
                    tracing::warn!(
                        set = self.name,
                        key = %crate::item::display_key(&target_key),
                        reason = %reason,
                        "bad input: the target is kept"
                    );
                    return keep(existing, true);
                }
            }
        } else {
            None
        };
        let existing = existing.map(|item| {
            let prefer = |name: &str| name == scope;
            let absent: Vec<&Item> = {
                let mut v: Vec<(bool, &Item)> = items
                    .iter()
                    .filter(|(_, _, i)| i.is_none())
                    .map(|(f, k, _)| (!prefer(&f.name), k))
                    .collect();
                v.sort_by_key(|(p, _)| *p);
                v.into_iter().map(|(_, k)| k).collect()
            };
            let present: Vec<&Item> = {
                let mut v: Vec<(bool, &Item)> = unless
                    .iter()
                    .filter(|(_, _, p)| *p)
                    .map(|(u, k, _)| (!prefer(&u.name), k))
                    .collect();
                v.sort_by_key(|(p, _)| *p);
                v.into_iter().map(|(_, k)| k).collect()
            };
            let guards = if let Some(k) = absent.first() {
                vec![Guard::absent((*k).clone())]
            } else if let Some(k) = present.first() {
                vec![Guard::exists((*k).clone())]
            } else {
                // Only `when` or the TTL says no: the delete holds while the
                // attributes they read are as read (a fact that goes meanwhile
                // only confirms it).
                as_read(true)
            };
            Guarded { item, guards }
        });
        Some(((desired, existing), false))
    }

    fn expired(&self, item: &Item, now: DateTime<Utc>) -> bool {
        self.target.ttl.as_ref().is_some_and(|(attr, _)| {
            item.opt_i64(attr)
                .ok()
                .flatten()
                .is_some_and(|t| t <= now.timestamp())
        })
    }

    /// The target of a row whose facts hold, if `when` and the TTL say so.
    fn build(&self, row: &Row<'_>, key: &Item) -> Result<Option<Item>, String> {
        for w in &self.when {
            let holds = match w {
                When::Distinct(a, b) => row.vars.get(a) != row.vars.get(b),
                When::Expr(p) => p(row)?,
            };
            if !holds {
                return Ok(None);
            }
        }
        let mut item = key.clone();
        if let Some((attr, value)) = &self.target.type_attr {
            item.insert(attr.to_string(), s(value));
        }
        for (attr, v) in &self.target.values {
            item.insert(attr.clone(), v.eval(row)?);
        }
        if let Some((attr, v)) = &self.target.ttl {
            let ttl = v.eval(row)?;
            let secs: i64 = ttl
                .as_n()
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("ttl `{attr}` is not an integer"))?;
            if secs <= row.now.timestamp() {
                return Ok(None);
            }
            item.insert(attr.to_string(), ttl);
        }
        Ok(Some(item))
    }

    /// Reads the facts of one page of `job` and plans it.
    pub async fn plan_job(
        &self,
        job: &JoinJob,
        scope: &Scope,
        reads: &Reads,
    ) -> Result<Plan, MessageError> {
        let names = self.key_names;
        let store = &reads.store;
        let mut plan = Plan::default();
        // Items already read (by key id) and the candidates' variables.
        let mut known: HashMap<String, Item> = HashMap::new();
        let mut candidates: Vec<Vars> = Vec::new();
        if scope.steps.is_empty() {
            candidates.push(job.bind.clone());
        }
        // The listing steps from the job's cursor on, within one page of
        // candidates: a small scope is one message, a large one continues
        // where the page ends.
        let (mut step_no, mut after) = (job.step, job.after.clone());
        let mut listed = 0;
        while let Some(step) = scope.steps.get(step_no) {
            // A listing kept in the ledger (an index's keys): its members.
            if let Step::List { fact, via: true } = step {
                let f = self.fact(fact).ok_or_else(|| permanent("no such fact"))?;
                if let (Some(index), Some(v)) = (&f.via_ledger, &f.via) {
                    let pk =
                        v.pk.render(&job.bind)
                            .ok_or_else(|| permanent("the listing's partition is not bound"))?;
                    let (members, next) = super::derive::index_members(
                        store,
                        &reads.ledger_table,
                        &format!("{index}#{pk}"),
                        after.as_deref(),
                        self.page - listed,
                    )
                    .await?;
                    listed += members.len();
                    for m in members {
                        let mut vars = job.bind.clone();
                        if v.sk.read(&m, &mut vars) {
                            candidates.push(vars);
                        }
                    }
                    match next {
                        Some(a) => after = Some(a),
                        None => {
                            step_no += 1;
                            after = None;
                        }
                    }
                    if listed >= self.page || after.is_some() {
                        break;
                    }
                    continue;
                }
            }
            let (listing, is_fact, is_target) = match step {
                Step::List { fact, via } => {
                    let f = self.fact(fact).ok_or_else(|| permanent("no such fact"))?;
                    match (&f.via, via) {
                        (Some(v), true) => (v, false, false),
                        _ => (&f.key, true, false),
                    }
                }
                Step::Sweep => (&self.target.key, false, true),
            };
            let pk = listing
                .pk
                .render(&job.bind)
                .ok_or_else(|| permanent("the listing's partition is not bound"))?;
            let (items, next) = store
                .query_page(
                    &reads.table,
                    names[0],
                    &pk,
                    names[1],
                    after.as_deref(),
                    self.page - listed,
                )
                .await?;
            listed += items.len();
            for item in items {
                let mut vars = job.bind.clone();
                if !listing.read(names, &item, &mut vars) {
                    continue;
                }
                if is_target && self.expired(&item, reads.now) {
                    continue;
                }
                if is_fact || is_target {
                    known.insert(item_id(&crate::item::key_of(&item, names)), item);
                }
                candidates.push(vars);
            }
            match next {
                Some(a) => {
                    after = Some(a);
                }
                None => {
                    step_no += 1;
                    after = None;
                }
            }
            if listed >= self.page || after.is_some() {
                break;
            }
        }
        if step_no < scope.steps.len() {
            plan.ahead.push(OutMessage {
                queue: self.queue,
                body: JoinJob {
                    step: step_no,
                    after,
                    ..job.clone()
                }
                .encode(),
            });
        }
        // Every fact, unless fact and target of the page, each read once.
        let mut wanted: BTreeMap<String, Item> = BTreeMap::new();
        for vars in &candidates {
            let keys = self
                .facts
                .iter()
                .map(|f| &f.key)
                .chain(self.unless.iter().map(|u| &u.key))
                .chain(std::iter::once(&self.target.key))
                .filter_map(|k| k.key(names, vars));
            for k in keys {
                let id = item_id(&k);
                if !known.contains_key(&id) {
                    wanted.insert(id, k);
                }
            }
        }
        // BatchGetItem requests of 100 keys, a few in flight at once.
        let keys: Vec<Item> = wanted.into_values().collect();
        let chunks: Vec<Vec<Item>> = keys.chunks(100).map(<[Item]>::to_vec).collect();
        let table = reads.table.as_str();
        let mut gets = futures::stream::iter(chunks)
            .map(|c| store.batch_get(table, c))
            .buffer_unordered(READ_CONCURRENCY);
        while let Some(items) = gets.next().await {
            for item in items? {
                known.insert(item_id(&crate::item::key_of(&item, names)), item);
            }
        }
        let read = |k: &Item| known.get(&item_id(k)).cloned();
        let mut seen = BTreeSet::new();
        for vars in &candidates {
            if !seen.insert(vars.clone()) {
                continue;
            }
            if let Some(((desired, existing), bad)) =
                self.decide_row(&scope.on, vars, &read, reads.now)
            {
                plan.desired.extend(desired);
                plan.existing.extend(existing);
                plan.bad_input_logged += usize::from(bad);
            }
        }
        Ok(plan)
    }
}

impl SetJob for JoinSet {
    fn name(&self) -> &'static str {
        self.name
    }

    fn key_names(&self) -> &'static [&'static str] {
        self.key_names
    }

    fn volatile(&self) -> &'static [&'static str] {
        self.volatile
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>> {
        Box::pin(async move {
            let (job, scope) = self.job(body)?;
            self.plan_job(&job, &scope, reads).await
        })
    }
}

/// Plans a job already decoded (for models whose own start bodies map onto
/// a scope, e.g. the social timeline's versioned jobs).
pub async fn plan_scope(set: &JoinSet, job: JoinJob, reads: &Reads) -> Result<Plan, MessageError> {
    let (job, scope) = set.check_job(job)?;
    set.plan_job(&job, &scope, reads).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn kt(pk: &str, sk: &str) -> KeyTemplate {
        KeyTemplate::parse(pk, sk).unwrap()
    }

    const NAMES: &[&str] = &["PK", "SK"];

    #[test]
    fn templates_render_and_parse_back() {
        let t = Template::parse("p#${p}#u#${a}").unwrap();
        assert_eq!(t.to_string(), "p#${p}#u#${a}");
        assert_eq!(t.vars().collect::<Vec<_>>(), vec!["p", "a"]);
        let v = vars(&[("p", "01H"), ("a", "ann")]);
        assert_eq!(t.render(&v).unwrap(), "p#01H#u#ann");
        let mut back = Vars::new();
        assert!(t.read("p#01H#u#ann", &mut back));
        assert_eq!(back, v);
        // A bound variable must agree; no match leaves `vars` untouched.
        let mut other = vars(&[("a", "bob")]);
        assert!(!t.read("p#01H#u#ann", &mut other));
        assert_eq!(other, vars(&[("a", "bob")]));
        for bad in ["p#01H", "p##u#ann", "q#01H#u#ann", "p#01H#u#ann#x"] {
            assert!(!t.read(bad, &mut Vars::new()), "{bad}");
        }
        assert!(Template::parse("info")
            .unwrap()
            .read("info", &mut Vars::new()));
        assert!(t.render(&vars(&[("p", "x")])).is_none(), "a is unbound");
    }

    #[test]
    fn templates_that_cannot_parse_back_are_refused() {
        for bad in ["u#${a}${b}", "u#${a}x", "u#${a", "u#${}", "u#${a-b}"] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }

    fn valid() -> Validate {
        Arc::new(|_| Ok(()))
    }

    fn fact(name: &str, key: KeyTemplate, via: Option<KeyTemplate>) -> FactDecl {
        FactDecl {
            name: name.into(),
            key,
            via,
            via_ledger: None,
            valid: valid(),
            reads: vec![],
        }
    }

    fn set(facts: Vec<FactDecl>, unless: Vec<UnlessDecl>) -> JoinSet {
        JoinSet {
            name: "s",
            queue: "q",
            key_names: NAMES,
            target: TargetDecl {
                key: kt("t#${x}", "y#${y}"),
                type_attr: None,
                values: vec![],
                ttl: None,
            },
            facts,
            unless,
            when: vec![],
            volatile: &[],
            page: 10,
        }
    }

    #[test]
    fn scopes_need_a_listing_keyed_by_what_the_change_binds() {
        // x's facts list the y's: fine both ways.
        let ok = set(
            vec![
                fact("xs", kt("x#${x}", "info"), None),
                fact(
                    "pair",
                    kt("x#${x}#pairs", "y#${y}"),
                    Some(kt("y#${y}#pairs", "x#${x}")),
                ),
            ],
            vec![],
        );
        let scopes = ok.scopes().unwrap();
        assert_eq!(
            scopes[0].steps,
            vec![
                Step::List {
                    fact: "pair".into(),
                    via: false
                },
                Step::Sweep
            ]
        );
        assert!(scopes[1].steps.is_empty());
        // Without the pair fact nothing lists y for a change of xs.
        let err = set(
            vec![
                fact("xs", kt("x#${x}", "info"), None),
                fact("ys", kt("y#${y}", "info"), None),
            ],
            vec![],
        )
        .scopes()
        .unwrap_err();
        assert!(err.to_string().contains("lists"), "{err}");
        // A fact variable the target does not have.
        let err = set(vec![fact("z", kt("x#${x}#${z}", "y#${y}"), None)], vec![])
            .scopes()
            .unwrap_err();
        assert!(err.to_string().contains("`z`"), "{err}");
        // A target variable no fact binds.
        let err = set(vec![fact("xs", kt("x#${x}", "info"), None)], vec![])
            .scopes()
            .unwrap_err();
        assert!(err.to_string().contains("`y`"), "{err}");
        // An unless fact is a scope of its own.
        let with_unless = set(
            vec![fact("pair", kt("x#${x}#pairs", "y#${y}"), None)],
            vec![UnlessDecl {
                name: "block".into(),
                key: kt("y#${y}#blocks", "x#${x}"),
            }],
        );
        let on: Vec<String> = with_unless
            .scopes()
            .unwrap()
            .into_iter()
            .map(|s| s.on)
            .collect();
        assert_eq!(on, vec!["pair".to_string(), "block".to_string()]);
    }

    #[test]
    fn unless_facts_exclude_and_guard() {
        let s = set(
            vec![FactDecl {
                reads: vec!["n"],
                ..fact("pair", kt("x#${x}#pairs", "y#${y}"), None)
            }],
            vec![UnlessDecl {
                name: "block".into(),
                key: kt("y#${y}#blocks", "x#${x}"),
            }],
        );
        let v = vars(&[("x", "1"), ("y", "2")]);
        let pair_key = kt("x#${x}#pairs", "y#${y}").key(NAMES, &v).unwrap();
        let block_key = kt("y#${y}#blocks", "x#${x}").key(NAMES, &v).unwrap();
        let target_key = kt("t#${x}", "y#${y}").key(NAMES, &v).unwrap();
        let mut pair = pair_key.clone();
        pair.insert("n".into(), AttributeValue::N("7".into()));
        let now = Utc::now();
        let table = |items: Vec<Item>| {
            move |k: &Item| {
                items
                    .iter()
                    .find(|i| crate::item::key_of(i, NAMES) == *k)
                    .cloned()
            }
        };
        let (d, x) = s
            .decide("pair", &v, &table(vec![pair.clone()]), now)
            .unwrap();
        let d = d.unwrap();
        assert_eq!(d.item, target_key);
        assert_eq!(
            d.guards,
            vec![
                Guard::equals(pair_key.clone(), "n", AttributeValue::N("7".into())),
                Guard::absent(block_key.clone()),
            ]
        );
        assert!(x.is_none());
        // Blocked: the target goes, guarded by the block's existence.
        let (d, x) = s
            .decide(
                "block",
                &v,
                &table(vec![pair.clone(), block_key.clone(), target_key.clone()]),
                now,
            )
            .unwrap();
        assert!(d.is_none());
        assert_eq!(x.unwrap().guards, vec![Guard::exists(block_key.clone())]);
        // The pair gone and blocked: the absence of the scope's own fact
        // is preferred when it is the pair's scope.
        let (_, x) = s
            .decide("pair", &v, &table(vec![block_key, target_key]), now)
            .unwrap();
        assert_eq!(x.unwrap().guards, vec![Guard::absent(pair_key)]);
    }

    #[test]
    fn job_bodies_round_trip_with_their_version() {
        let j = JoinJob {
            set: "s".into(),
            scope: "pair".into(),
            bind: vars(&[("x", "1")]),
            step: 1,
            after: Some("y#2".into()),
        };
        let body = j.encode();
        assert_eq!(
            body,
            r#"{"after":"y#2","bind":{"x":"1"},"scope":"pair","set":"s","step":1,"version":1}"#
        );
        assert_eq!(JoinJob::decode(&body).unwrap(), j);
        assert!(matches!(
            JoinJob::decode(r#"{"version":1,"set":"s","scope":"p","bind":{},"extra":1}"#),
            Err(MessageError::Permanent { .. })
        ));
    }
}
