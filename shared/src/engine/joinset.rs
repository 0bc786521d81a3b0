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

    /// The literal start every value has with `vars` bound: the parts up
    /// to the first unbound variable (`s#j1#` of `s#${jobId}#${seekerId}`
    /// with `jobId` bound). `None` when every variable is bound (the value
    /// itself) or the start is empty.
    pub fn bound_prefix(&self, vars: &Vars) -> Option<String> {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Part::Lit(l) => out.push_str(l),
                Part::Var(v) => match vars.get(v) {
                    Some(x) => out.push_str(x),
                    None => return (!out.is_empty()).then_some(out),
                },
            }
        }
        None
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

/// Computes a variable's value from a fact's item.
pub type AlsoFn = Arc<dyn Fn(&Item) -> Result<String, String> + Send + Sync>;

/// A variable a fact's item binds besides its key (`employerId` of a job,
/// a seeker's city normalised): its value from the item.
#[derive(Clone)]
pub struct Also {
    pub var: String,
    pub of: AlsoFn,
}

impl fmt::Debug for Also {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Also({})", self.var)
    }
}

/// Binds `also` from `item` into `vars`: `false` if a value disagrees
/// with one bound, cannot be part of a key, or cannot be computed.
pub fn bind_also(also: &[Also], item: &Item, vars: &mut Vars) -> bool {
    let mut out = vars.clone();
    for a in also {
        let Ok(v) = (a.of)(item) else {
            return false;
        };
        if !valid_var_value(&v) || out.get(&a.var).is_some_and(|old| *old != v) {
            return false;
        }
        out.insert(a.var.clone(), v);
    }
    *vars = out;
    true
}

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
    /// Variables its item binds besides its key. A row whose variables
    /// disagree with them is not this fact's (a seeker of another city):
    /// no target, an existing one deleted while the fact is as read.
    pub also: Vec<Also>,
    /// A lower bound on one of its key's variables (jobs of the last 30
    /// days): a row below it has no target, and a listing of the fact's
    /// partition starts there ([`ListFrom`]).
    pub from: Option<ListFrom>,
}

impl FactDecl {
    /// The variables its item binds: its key's and its `also`'s.
    pub fn binds(&self) -> BTreeSet<&str> {
        let mut v = self.key.vars();
        v.extend(self.also.iter().map(|a| a.var.as_str()));
        v
    }
}

impl fmt::Debug for FactDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactDecl")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("via", &self.via)
            .field("via_ledger", &self.via_ledger)
            .field("reads", &self.reads)
            .field("also", &self.also)
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

/// A fact whose existence excludes the target (anti-join).
#[derive(Debug, Clone)]
pub struct UnlessDecl {
    pub name: String,
    pub key: KeyTemplate,
    /// Variables its item binds besides its key, for the scope its change
    /// starts (its presence alone excludes).
    pub also: Vec<Also>,
    /// `Some(once)`: the marker of that once effect in the ledger, its key
    /// `key.pk` rendered (`${seekerId}#${jobId}`): the effect happened. It
    /// starts no scope (the effect itself must delete the target).
    pub once: Option<String>,
}

impl UnlessDecl {
    /// The key read for `vars`, and whether it is in the ledger.
    pub fn key_of(&self, names: &[&str], vars: &Vars) -> Option<(Item, bool)> {
        match &self.once {
            Some(once) => Some((
                super::once::marker_key(once, &self.key.pk.render(vars)?),
                true,
            )),
            None => Some((self.key.key(names, vars)?, false)),
        }
    }

    fn vars(&self) -> BTreeSet<&str> {
        match &self.once {
            Some(_) => self.key.pk.vars().collect(),
            None => self.key.vars(),
        }
        .into_iter()
        .chain(self.also.iter().map(|a| a.var.as_str()))
        .collect()
    }
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

impl TargetDecl {
    /// Variables the target carries as attributes besides its key
    /// (`postedAt: postedAt`): (attribute, variable). A sweep reads them
    /// back, so a target is found whole even when its facts are gone.
    pub fn carried(&self) -> Vec<(&str, &str)> {
        let key = self.key.vars();
        self.values
            .iter()
            .filter_map(|(a, v)| match v {
                Value::Var(x) if !key.contains(x.as_str()) => Some((a.as_str(), x.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The set's variables: the key's and the carried ones.
    pub fn vars(&self) -> BTreeSet<&str> {
        let mut v = self.key.vars();
        v.extend(self.carried().into_iter().map(|(_, x)| x));
        v
    }
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

/// A fact as read for one row.
enum State {
    Absent,
    Bad(String),
    Valid,
}

/// What one row (one candidate's variables) implies: the target it should
/// have and the target it has, each with its guards (see [`Plan`]).
pub type Decision = (Option<Guarded>, Option<Guarded>);

/// A row's decision, whether evaluating it failed on valid facts, and the
/// key of a fact that is bad input (with why).
type RowDecision = (Decision, bool, Option<(Item, String)>);

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
    /// templates: one per fact and per `unless` fact (but a once marker).
    pub fn scopes(&self) -> Result<Vec<Scope>, DeclError> {
        let target_vars = self.target.vars();
        let mut names = BTreeSet::new();
        // Each fact's name, the variables its change binds (key and
        // `also`), whether it starts a scope.
        let mut decls: Vec<(&String, BTreeSet<&str>, bool)> = Vec::new();
        for f in &self.facts {
            decls.push((&f.name, f.binds(), true));
        }
        for u in &self.unless {
            decls.push((&u.name, u.vars(), u.once.is_none()));
        }
        for (name, vars, _) in &decls {
            if !names.insert(name.as_str()) {
                return Err(self.set_err(format!("two facts are named `{name}`")));
            }
            if let Some(v) = vars.iter().find(|v| !target_vars.contains(*v)) {
                return Err(self.set_err(format!(
                    "fact `{name}`: variable `{v}` is not in the target's key {} (nor a value of it)",
                    self.target.key.pk
                )));
            }
        }
        let fact_vars: BTreeSet<&str> = decls
            .iter()
            .take(self.facts.len())
            .flat_map(|(_, v, _)| v.iter().copied())
            .collect();
        if let Some(v) = target_vars.iter().find(|v| !fact_vars.contains(*v)) {
            return Err(self.set_err(format!("target variable `{v}` is bound by no fact")));
        }
        if self.facts.is_empty() {
            return Err(self.set_err("a join set needs at least one fact"));
        }
        let mut scopes = Vec::new();
        for (name, bound, starts) in &decls {
            if !starts {
                continue;
            }
            let missing: BTreeSet<&str> = target_vars.difference(bound).copied().collect();
            let mut steps = Vec::new();
            if !missing.is_empty() {
                let step = self.listing_step(name, bound, &missing).ok_or_else(|| {
                    self.set_err(format!(
                        "a change of `{name}` binds {}: no fact's partition (nor \
                             its `via` listing) keyed by them lists {}{}",
                        var_names(bound.iter().copied()),
                        var_names(missing.iter().copied()),
                        self.listing_hint(name, bound, &missing)
                    ))
                })?;
                steps.push(step);
                if self.target.key.pk.vars().all(|v| bound.contains(v)) {
                    steps.push(Step::Sweep);
                }
            }
            scopes.push(Scope {
                on: name.to_string(),
                bound: bound.iter().map(|v| v.to_string()).collect(),
                steps,
            });
        }
        self.key_step()?;
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
        if job.set != self.name {
            return Err(MessageError::invalid(format!(
                "a job of set `{}` sent to `{}`",
                job.set, self.name
            )));
        }
        let scopes = self
            .scopes()
            .map_err(|e| MessageError::invalid(format!("declaration: {e}")))?;
        let scope = scopes
            .into_iter()
            .find(|s| s.on == job.scope)
            .ok_or_else(|| MessageError::invalid(format!("no scope `{}`", job.scope)))?;
        let given: BTreeSet<String> = job.bind.keys().cloned().collect();
        if given != scope.bound {
            return Err(MessageError::invalid(format!(
                "scope `{}` binds {}, the job {}",
                scope.on,
                var_names(scope.bound.iter().map(String::as_str)),
                var_names(given.iter().map(String::as_str))
            )));
        }
        if !job.bind.values().all(|v| valid_var_value(v)) {
            return Err(MessageError::invalid(
                "a bound value cannot be part of a key",
            ));
        }
        if job.step > 0 && job.step >= scope.steps.len() {
            return Err(MessageError::invalid(format!("no step {}", job.step)));
        }
        if job.after.as_ref().is_some_and(|a| a.len() > 1024) {
            return Err(MessageError::invalid("`after` is longer than a sort key"));
        }
        Ok((job, scope))
    }
}

#[path = "joinset_plan.rs"]
mod plan;
#[path = "joinset_rows.rs"]
mod rows;
pub use plan::{FromFn, ListFrom};

#[cfg(test)]
#[path = "joinset_tests.rs"]
mod tests;
