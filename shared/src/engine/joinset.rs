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
            let mut v = f.key.vars();
            v.extend(f.also.iter().map(|a| a.var.as_str()));
            decls.push((&f.name, v, true));
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
                let lists = |k: &KeyTemplate, also: &[Also]| {
                    let mut binds = k.vars();
                    binds.extend(also.iter().map(|a| a.var.as_str()));
                    k.pk.vars().all(|v| bound.contains(v))
                        && missing.iter().all(|m| binds.contains(m))
                };
                let step = self
                    .facts
                    .iter()
                    .filter(|f| &f.name != *name)
                    .find_map(|f| {
                        if lists(&f.key, &f.also) {
                            Some(Step::List {
                                fact: f.name.clone(),
                                via: false,
                            })
                        } else if f.via.as_ref().is_some_and(|v| lists(v, &[])) {
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
                on: name.to_string(),
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
        self.decide_row(scope, vars, read, &|_| None, now)
            .map(|(d, _, _)| d)
    }

    /// [`JoinSet::decide`] with the ledger's items too (the once markers
    /// `unless` facts name): what `verify` compares the table with.
    pub fn decide_in(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        read_ledger: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<Decision> {
        self.decide_row(scope, vars, read, read_ledger, now)
            .map(|(d, _, _)| d)
    }

    /// [`JoinSet::decide`], and whether evaluating `when`, the values or
    /// the TTL failed on valid facts (bad input the stream rules did not
    /// see, e.g. an overflow: counted by the consumer).
    fn decide_row(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        read_ledger: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<RowDecision> {
        let names = self.key_names;
        let target_key = self.target.key.key(names, vars)?;
        let existing = read(&target_key).filter(|e| !self.expired(e, now));
        let keep = |existing: Option<Item>, bad: bool, fact: Option<(Item, String)>| {
            let g = existing.map(|item| Guarded {
                item,
                guards: vec![],
            });
            Some(((g.clone(), g), bad, fact))
        };
        let mut items: Vec<(&FactDecl, Item, Option<Item>)> = Vec::new();
        for f in &self.facts {
            let key = f.key.key(names, vars)?;
            let item = read(&key);
            items.push((f, key, item));
        }
        let mut states = Vec::new();
        // A valid fact whose `also` disagrees with the row: not this row's.
        let mut elsewhere = false;
        for (f, _, item) in &items {
            states.push(match item {
                None => State::Absent,
                Some(i) => match (f.valid)(i) {
                    Ok(()) => {
                        let mut own = vars.clone();
                        if !f.also.is_empty() && !bind_also(&f.also, i, &mut own) {
                            elsewhere = true;
                        }
                        State::Valid
                    }
                    Err(reason) => State::Bad(reason),
                },
            });
        }
        // A fact that is bad input: the target keeps what its earlier
        // valid states implied; the fact is logged and counted once per
        // job (by the caller).
        if let Some((key, reason)) = items
            .iter()
            .zip(&states)
            .find_map(|((_, k, _), s)| match s {
                State::Bad(r) => Some((k.clone(), r.clone())),
                _ => None,
            })
        {
            return keep(existing, false, Some((key, reason)));
        }
        let mut unless = Vec::new();
        for u in &self.unless {
            let (key, ledger) = u.key_of(names, vars)?;
            let present = if ledger {
                read_ledger(&key).is_some()
            } else {
                read(&key).is_some()
            };
            unless.push((u, key, present, ledger));
        }
        let in_table = |g: Guard, ledger: bool| if ledger { g.in_ledger() } else { g };
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
                g.extend(
                    unless
                        .iter()
                        .map(|(_, k, _, l)| in_table(Guard::absent(k.clone()), *l)),
                );
            }
            g
        };
        let all_valid = states.iter().all(|s| matches!(s, State::Valid));
        let excluded = elsewhere || unless.iter().any(|(_, _, present, _)| *present);
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
                    return keep(existing, true, None);
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
            let present: Vec<(&Item, bool)> = {
                let mut v: Vec<(bool, (&Item, bool))> = unless
                    .iter()
                    .filter(|(_, _, p, _)| *p)
                    .map(|(u, k, _, l)| (!prefer(&u.name), (k, *l)))
                    .collect();
                v.sort_by_key(|(p, _)| *p);
                v.into_iter().map(|(_, k)| k).collect()
            };
            let guards = if let Some(k) = absent.first() {
                vec![Guard::absent((*k).clone())]
            } else if let Some((k, l)) = present.first() {
                vec![in_table(Guard::exists((*k).clone()), *l)]
            } else {
                // Only `when` or the TTL says no: the delete holds while the
                // attributes they read are as read (a fact that goes meanwhile
                // only confirms it).
                as_read(true)
            };
            Guarded { item, guards }
        });
        Some(((desired, existing), false, None))
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
            let (listing, is_fact, is_target, also) = match step {
                Step::List { fact, via } => {
                    let f = self.fact(fact).ok_or_else(|| permanent("no such fact"))?;
                    match (&f.via, via) {
                        (Some(v), true) => (v, false, false, &[][..]),
                        _ => (&f.key, true, false, &f.also[..]),
                    }
                }
                Step::Sweep => (&self.target.key, false, true, &[][..]),
            };
            let carried = if is_target {
                self.target.carried()
            } else {
                vec![]
            };
            let pk = listing
                .pk
                .render(&job.bind)
                .ok_or_else(|| permanent("the listing's partition is not bound"))?;
            // Only the sort keys that can match: from the template's bound
            // start (`s#<jobId>#` of one job's targets) to where it ends.
            let prefix = listing.sk.bound_prefix(&job.bind);
            let start = after.clone().or_else(|| prefix.clone());
            let (mut items, mut next) = store
                .query_page(
                    &reads.table,
                    names[0],
                    &pk,
                    names[1],
                    start.as_deref(),
                    self.page - listed,
                )
                .await?;
            listed += items.len();
            if let Some(p) = &prefix {
                let within = |i: &Item| i.s(names[1]).is_ok_and(|sk| sk.starts_with(p.as_str()));
                if let Some(end) = items.iter().position(|i| !within(i)) {
                    items.truncate(end);
                    next = None;
                }
            }
            for item in items {
                let mut vars = job.bind.clone();
                if !listing.read(names, &item, &mut vars) {
                    continue;
                }
                if is_target && self.expired(&item, reads.now) {
                    continue;
                }
                // A fact listed binds its `also` (one that cannot is not a
                // candidate: a sweep finds its target); a target its
                // carried variables.
                if is_fact && !bind_also(also, &item, &mut vars) {
                    continue;
                }
                let carried_ok = carried.iter().all(|(attr, var)| match item.s(attr) {
                    Ok(v) if valid_var_value(v) && vars.get(*var).is_none_or(|b| b == v) => {
                        vars.insert(var.to_string(), v.to_string());
                        true
                    }
                    _ => false,
                });
                if !carried_ok {
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
        let mut markers: BTreeMap<String, Item> = BTreeMap::new();
        for vars in &candidates {
            let keys = self
                .facts
                .iter()
                .map(|f| &f.key)
                .chain(std::iter::once(&self.target.key))
                .filter_map(|k| k.key(names, vars))
                .map(|k| (k, false))
                .chain(self.unless.iter().filter_map(|u| u.key_of(names, vars)));
            for (k, ledger) in keys {
                let id = item_id(&k);
                if ledger {
                    markers.insert(id, k);
                } else if !known.contains_key(&id) {
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
        // Once markers the `unless` facts name, from the ledger.
        let mut ledger_known: HashMap<String, Item> = HashMap::new();
        let marker_keys: Vec<Item> = markers.into_values().collect();
        for chunk in marker_keys.chunks(100) {
            for item in store.batch_get(&reads.ledger_table, chunk.to_vec()).await? {
                let key = crate::item::key_of(&item, &[crate::ledger::PK, crate::ledger::SK]);
                ledger_known.insert(item_id(&key), item);
            }
        }
        let read = |k: &Item| known.get(&item_id(k)).cloned();
        let read_ledger = |k: &Item| ledger_known.get(&item_id(k)).cloned();
        let mut seen = BTreeSet::new();
        let mut bad_facts = BTreeSet::new();
        for vars in &candidates {
            if !seen.insert(vars.clone()) {
                continue;
            }
            if let Some(((desired, existing), bad, bad_fact)) =
                self.decide_row(&scope.on, vars, &read, &read_ledger, reads.now)
            {
                plan.desired.extend(desired);
                plan.existing.extend(existing);
                plan.bad_input_logged += usize::from(bad);
                if let Some((key, reason)) = bad_fact {
                    let label = crate::item::display_key(&key);
                    if bad_facts.insert(label.clone()) {
                        tracing::warn!(set = self.name, key = %label, reason = %reason, "a fact is bad input: what it implied is kept");
                        plan.bad_input_logged += 1;
                    }
                }
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
#[path = "joinset_tests.rs"]
mod tests;
