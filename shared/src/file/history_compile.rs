//! Compiling a `history:` block ([`super::history::RawHistory`]) into a
//! [`HistorySpec`]: every problem with its line and column, and a
//! suggestion when one exists.

use super::expr::Expr;
use super::history::{root_part, HistorySpec, Member, Shape, SEQUENCE};
use super::model::{at, leak, Compiler, Entity, Scope, Value};
use serde::Deserialize;

use super::raw::{Ordered, Scalar, Spanned};
use super::template::{Binder, KeyTemplate, Part};
use crate::models::table::TableDef;
use crate::models::{EventFilter, KeyRule};

// ---------------------------------------------------------------- raw

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHistory {
    /// The processor's name (ledger keys, Lambda name); default `history`.
    pub processor: Option<Spanned<String>>,
    pub root: Spanned<RawRoot>,
    /// Member entity -> how it shows in a snapshot.
    #[serde(default)]
    pub members: Ordered<Spanned<RawMember>>,
    pub entries: Spanned<RawEntries>,
    /// The processor-owned attribute on the root mirroring the last entry's
    /// number; default `historySequence`.
    pub mirror: Option<Spanned<String>>,
    /// Whether deleting the root deletes its members (the application's
    /// own items) too; default `true`. Its entries are deleted either way.
    pub cascade: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoot {
    pub entity: Spanned<String>,
    /// The root's attributes a snapshot keeps (absent ones as `NULL`);
    /// default: every attribute but the keys and the processor's.
    pub fields: Option<Spanned<Vec<Spanned<String>>>>,
    /// Description of the root's creation (a template).
    pub created: Option<Spanned<Scalar>>,
    /// Descriptions of the root's updates: the first rule whose `when`
    /// holds; none: no entry (the change still folds into the state).
    #[serde(default)]
    pub updated: Vec<Spanned<RawSay>>,
    /// Attribute -> label, in the order `${changes}` lists them.
    #[serde(default)]
    pub labels: Ordered<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSay {
    pub when: Option<Spanned<Scalar>>,
    pub say: Spanned<Scalar>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMember {
    /// The snapshot attribute listing the members.
    pub list: Spanned<String>,
    pub fields: Option<Spanned<Vec<Spanned<String>>>>,
    /// Attributes the list is sorted by (default: the sort key's names).
    #[serde(default)]
    pub order: Vec<Spanned<String>>,
    pub added: Option<Spanned<Scalar>>,
    pub updated: Option<Spanned<Scalar>>,
    pub removed: Option<Spanned<Scalar>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEntries {
    /// A processor entity in the root's partition whose sort key binds
    /// `${sequence}`.
    pub entity: Spanned<String>,
    /// Zero padding of the number in the sort key (default 8).
    pub digits: Option<Spanned<u32>>,
    /// Description of an adoption entry (default `Imported`).
    pub imported: Option<Spanned<String>>,
}

const DEFAULT_UPDATED: &str = "changes != ''";

/// The literal text of a template's parts with the binders blanked: two
/// templates with the same shape address the same partition.
fn shape_of(t: &KeyTemplate) -> Vec<Option<&str>> {
    t.parts
        .iter()
        .map(|p| match p {
            Part::Lit(l) => Some(l.as_str()),
            Part::Hole(..) => None,
        })
        .collect()
}

fn prefix(t: &KeyTemplate) -> Option<&str> {
    match t.parts.first() {
        Some(Part::Lit(l)) => Some(l.as_str()),
        _ => None,
    }
}

impl Compiler<'_> {
    fn entity_named(
        &mut self,
        s: &Spanned<String>,
        entities: &[Entity],
        what: &str,
    ) -> Option<usize> {
        let what = format!("history: {what}");
        super::model::entity_index(entities.iter().map(|e| e.name), s, &what)
            .map_err(|p| self.problems.push(p))
            .ok()
    }

    /// Attribute names of `e` a snapshot may name.
    fn attribute_list(
        &mut self,
        list: &Spanned<Vec<Spanned<String>>>,
        e: &Entity,
        what: &str,
        reported: &[&str],
    ) -> Vec<&'static str> {
        let mut out = Vec::new();
        for f in &list.value {
            match e.known_attr(&f.value) {
                Ok(a) => out.push(a.name),
                Err(_) if reported.contains(&f.value.as_str()) => {}
                Err(why) => self.err(at(f), format!("history: {what}: {why}")),
            }
        }
        if out.is_empty() && list.value.is_empty() {
            self.err(at(list), format!("history: {what}: an empty list"));
        }
        out
    }

    /// The names an entity's description reads: its attributes and key
    /// names (of the image the change is about), `old` and `new` (maps of
    /// the images) and, for the root's updates, `changes`.
    fn history_scope<'a>(&self, e: &'a Entity, changes: bool) -> Scope<'a> {
        let mut scope = self.scope(e);
        scope.entity = "history";
        if !scope.has("old") && !scope.has("new") {
            scope.images = &["old", "new"];
        }
        for extra in ["old", "new"]
            .into_iter()
            .chain(changes.then_some("changes"))
        {
            if !scope.has(extra) {
                scope.names.push((extra.to_string(), None));
            }
        }
        scope
    }

    /// A description template, or `default` when the file gives none.
    fn say(&mut self, s: &Option<Spanned<Scalar>>, scope: &Scope) -> Result<Option<Value>, ()> {
        match s {
            None => Ok(None),
            Some(s) => self.template(s, scope).map(Some).ok_or(()),
        }
    }

    pub(super) fn history(
        &mut self,
        raw: &Spanned<RawHistory>,
        entities: &[Entity],
        table: &TableDef,
    ) -> Option<HistorySpec> {
        let h = &raw.value;
        let before = self.problems.len();
        let root = self.entity_named(&h.root.value.entity, entities, "root")?;
        let re = &entities[root];
        let root_pos = at(&h.root.value.entity);
        let root_name = root_part(re.key.get(1).and_then(|k| prefix(&k.template)));
        if re.foreign {
            // Nothing else about this history can be said of such a root.
            self.err(root_pos, foreign_part("the root", re.name, "its root's"));
            return None;
        }
        if !re.writer {
            self.err(
                root_pos,
                format!("history: the root `{}` is a processor entity: a history records a writer's items", re.name),
            );
        }
        // The root's key binds one name, the aggregate's id, in the
        // partition key; or (keyed under its owner) names in the partition
        // key and names of its own ending the sort key.
        if re.key.len() != 2 {
            return None;
        }
        let pk_names: Vec<&str> = re.key[0]
            .template
            .binders()
            .map(|b| b.name.as_str())
            .collect();
        let sk_names: Vec<&str> = re.key[1]
            .template
            .binders()
            .map(|b| b.name.as_str())
            .collect();
        let owned = sk_names.iter().any(|b| !pk_names.contains(b));
        let distinct = |v: &[&str]| v.iter().enumerate().all(|(i, b)| !v[..i].contains(b));
        let owned_ok = sk_names.iter().all(|b| !pk_names.contains(b))
            && distinct(&pk_names)
            && distinct(&sk_names)
            && matches!(re.key[1].template.parts.last(), Some(Part::Hole(..)));
        let legacy_ok = pk_names.len() == 1 && sk_names.iter().all(|b| *b == pk_names[0]);
        if (owned && !owned_ok) || (!owned && !legacy_ok) {
            self.err(
                root_pos,
                format!(
                    "history: the root `{}`'s key must bind its id in the partition key (`{}` = `{}`: an aggregate is the partition of one root), or, keyed under its owner, its owner's names in the partition key and its own names ending the sort key (`{}` = `ORDER#${{orderId}}` under `CUST#${{customerId}}`: an aggregate is the items whose sort keys start with its root's)",
                    re.name, re.key[0].attr, re.key[0].template.source, re.key[1].attr
                ),
            );
            return None;
        }
        let pk_arity = pk_names.len();
        let sk_arity = if owned { sk_names.len() } else { 0 };
        // Keyed under its owner: a member's or the entries' sort key starts
        // with the root's and a literal.
        let root_sk = &re.key[1].template;
        let extends = |t: &KeyTemplate| -> bool {
            let n = root_sk.parts.len();
            t.parts.len() > n
                && t.parts
                    .iter()
                    .zip(&root_sk.parts)
                    .all(|(a, b)| match (a, b) {
                        (Part::Lit(x), Part::Lit(y)) => x == y,
                        (Part::Hole(..), Part::Hole(..)) => true,
                        _ => false,
                    })
                && matches!(t.parts[n], Part::Lit(_))
        };
        let partition = shape_of(&re.key[0].template);
        let mirror = h
            .mirror
            .as_ref()
            .map(|m| m.value.as_str())
            .unwrap_or("historySequence");
        if let Some(a) = re.attr(mirror) {
            self.err(
                h.mirror.as_ref().map(at).unwrap_or(root_pos),
                format!("history: `{}` is the processor's (the mirror of the entry count): remove it from `{}`'s attributes", a.name, re.name),
            );
        }
        // What the processor writes onto a writer's item: its projection,
        // its `compute:` values and its counter sums.
        let processor_owned = |e: &Entity| -> Vec<&'static str> {
            let mut out = vec![table.pk, table.sk];
            out.extend(e.processor_owned());
            out
        };
        let mut root_excluded = processor_owned(re);
        root_excluded.push(leak(mirror));
        let root_fields = h
            .root
            .value
            .fields
            .as_ref()
            .map(|f| self.attribute_list(f, re, "root fields", &[]));
        let root_scope = self.history_scope(re, false);
        let created = self.say(&h.root.value.created, &root_scope).ok();
        let update_scope = self.history_scope(re, true);
        let mut updated = Vec::new();
        for u in &h.root.value.updated {
            let when = self.condition(&u.value.when, &update_scope);
            let say = self.template(&u.value.say, &update_scope);
            if let (Some(when), Some(say)) = (when, say) {
                updated.push((when, say));
            }
        }
        if h.root.value.updated.is_empty() {
            let when = Expr::compile(DEFAULT_UPDATED).ok();
            let say = super::template::split("Updated ${changes}")
                .ok()
                .map(|parts| {
                    Value(
                        parts
                            .into_iter()
                            .filter_map(|p| match p {
                                Part::Lit(l) => Some(Part::Lit(l)),
                                Part::Hole(src, off) => {
                                    Expr::compile(&src).ok().map(|e| Part::Hole(e, off))
                                }
                            })
                            .collect(),
                    )
                });
            if let Some(say) = say {
                updated.push((when, say));
            }
        }
        let mut labels = Vec::new();
        for (attr, label) in &h.root.value.labels.0 {
            match re.known_attr(attr) {
                Ok(a) => labels.push((a.name, label.value.clone())),
                Err(why) => self.err(at(label), format!("history: labels: {why}")),
            }
        }
        // What the descriptions tell apart: the labelled attributes, those
        // the `updated` rules read (`old.x`, `new.x`, `x`) and the key's names.
        // Every attribute when any change of the snapshot writes an entry (no
        // labels, and the default rule or one without `when`); a change no
        // rule matches writes none (SPEC §3: it shows in the next entry).
        let every_change = h.root.value.updated.is_empty()
            || h.root.value.updated.iter().any(|u| u.value.when.is_none());
        let described = (!labels.is_empty() || !every_change).then(|| {
            let mut d: Vec<&'static str> = labels.iter().map(|(a, _)| *a).collect();
            let texts = h.root.value.updated.iter().flat_map(|u| {
                u.value
                    .when
                    .iter()
                    .map(|w| w.value.0.as_str())
                    .chain(std::iter::once(u.value.say.value.0.as_str()))
            });
            for text in texts {
                for a in &re.attrs {
                    if mentions(text, a.name) && !d.contains(&a.name) {
                        d.push(a.name);
                    }
                }
            }
            for b in re.key.iter().flat_map(|k| k.template.binders()) {
                if !d.contains(&b.name.as_str()) {
                    d.push(leak(&b.name));
                }
            }
            d
        });
        // The root's attributes outside its `fields` that the descriptions
        // read (`created`, the `updated` rules, `labels`): kept in the fold
        // state beside the snapshot's, so the sequence mirror's guard tells
        // an incarnation re-created with other values of them apart
        // (user9's FINDINGS #14: a `created` reading `riderId`).
        let root_read: Vec<&'static str> = match &root_fields {
            None => Vec::new(),
            Some(fields) => {
                let texts: Vec<&str> = h
                    .root
                    .value
                    .created
                    .iter()
                    .map(|c| c.value.0.as_str())
                    .chain(h.root.value.updated.iter().flat_map(|u| {
                        u.value
                            .when
                            .iter()
                            .map(|w| w.value.0.as_str())
                            .chain(std::iter::once(u.value.say.value.0.as_str()))
                    }))
                    .collect();
                re.attrs
                    .iter()
                    .map(|a| a.name)
                    .filter(|a| !fields.contains(a) && !root_excluded.contains(a))
                    .filter(|a| {
                        labels.iter().any(|(l, _)| l == a) || texts.iter().any(|t| mentions(t, a))
                    })
                    .collect()
            }
        };
        let mut members: Vec<Member> = Vec::new();
        for (name, m) in &h.members.0 {
            let Some(i) = entities.iter().position(|e| e.name == name) else {
                let hint = super::model::suggest(name, entities.iter().map(|e| e.name))
                    .unwrap_or_default();
                self.err(
                    at(&m.value.list),
                    format!("history: members: unknown entity `{name}`{hint}"),
                );
                continue;
            };
            let e = &entities[i];
            let pos = at(&m.value.list);
            if i == root {
                self.err(pos, format!("history: `{name}` is the root: a member is another entity of its partition"));
                continue;
            }
            if e.foreign {
                self.err(pos, foreign_part("member", name, "its members'"));
                continue;
            }
            if !e.writer {
                self.err(pos, format!("history: member `{name}` is a processor entity: a history records a writer's items"));
                continue;
            }
            if e.key.len() != 2 {
                continue;
            }
            if shape_of(&e.key[0].template) != partition
                || e.key[0].template.binders().count() != pk_arity
            {
                self.err(
                    pos,
                    format!(
                        "history: member `{name}`'s {} `{}` is not the root's partition `{}`: an aggregate's members live in its partition",
                        e.key[0].attr, e.key[0].template.source, re.key[0].template.source
                    ),
                );
                continue;
            }
            if owned && !extends(&e.key[1].template) {
                self.err(
                    pos,
                    format!(
                        "history: member `{name}`'s {} `{}` does not start with the root's `{}` and a literal (e.g. `{}#LINE#${{sku}}`): an aggregate keyed under its owner is the items whose sort keys start with its root's",
                        e.key[1].attr, e.key[1].template.source, root_sk.source, root_sk.source
                    ),
                );
                continue;
            }
            if e.key[1].template.matches(&root_name).is_some() {
                self.err(pos, format!("history: member `{name}`'s sort key matches `{root_name}`, the root's part name: give it a literal prefix"));
            }
            // A snapshot names each member by its sort key's names (those
            // of its aggregate's are the entry's): a declared attribute,
            // typed as declared, or a name only the key binds (a part a
            // library keeps only in the key: ElectroDB's padded
            // `position_key`), read from the key, typed by its format
            // (import16 #1). With `fields`, each is among them.
            let own_names: Vec<&Binder> = e.key[1].template.binders().skip(sk_arity).collect();
            let key_only: Vec<&str> = own_names
                .iter()
                .filter(|b| e.attr(&b.name).is_none())
                .map(|b| b.name.as_str())
                .collect();
            let fields = m.value.fields.as_ref().map(|f| {
                let mut out =
                    self.attribute_list(f, e, &format!("member `{name}` fields"), &key_only);
                out.extend(
                    f.value
                        .iter()
                        .filter(|f| key_only.contains(&f.value.as_str()))
                        .map(|f| leak(&f.value)),
                );
                out
            });
            for b in own_names {
                if fields
                    .as_ref()
                    .is_some_and(|f| !f.contains(&b.name.as_str()))
                {
                    self.err(
                        pos,
                        format!(
                            "history: member `{name}`: `{}` of its sort key `{}` must be among its `fields` (a snapshot names each member by it)",
                            b.name, e.key[1].template.source,
                        ),
                    );
                }
            }
            let mut order = Vec::new();
            for o in &m.value.order {
                match e.known_attr(&o.value) {
                    Ok(a) => order.push(a.name),
                    Err(why) => self.err(at(o), format!("history: member `{name}` order: {why}")),
                }
            }
            if m.value.order.is_empty() {
                order = e.key[1]
                    .template
                    .binders()
                    .skip(sk_arity)
                    .filter_map(|b| e.attr(&b.name))
                    .map(|a| a.name)
                    .collect();
            }
            let list = &m.value.list.value;
            if members.iter().any(|o| o.list == list) || re.attr(list).is_some() {
                self.err(
                    pos,
                    format!(
                        "history: member `{name}`: list `{list}` is already a name of the snapshot"
                    ),
                );
            }
            let scope = self.history_scope(e, false);
            let added = self.say(&m.value.added, &scope).ok().flatten();
            let upd = self.say(&m.value.updated, &scope).ok().flatten();
            let removed = self.say(&m.value.removed, &scope).ok().flatten();
            members.push(Member {
                shape: Shape {
                    entity: i,
                    fields,
                    excluded: processor_owned(e),
                },
                list: leak(list),
                order,
                added,
                updated: upd,
                removed,
            });
        }
        let ent = &h.entries.value;
        let entries = self.entity_named(&ent.entity, entities, "entries")?;
        let ee = &entities[entries];
        let epos = at(&ent.entity);
        if ee.writer {
            self.err(
                epos,
                format!(
                    "history: entries `{}` must be `owner: processor` (the processor writes them)",
                    ee.name
                ),
            );
        }
        let mut aggregate_attrs: Vec<&'static str> = Vec::new();
        if ee.key.len() == 2 {
            if shape_of(&ee.key[0].template) != partition
                || ee.key[0].template.binders().count() != pk_arity
            {
                self.err(
                    epos,
                    format!(
                        "history: entries `{}`'s {} `{}` is not the root's partition `{}`: entries live in their aggregate's partition",
                        ee.name, ee.key[0].attr, ee.key[0].template.source, re.key[0].template.source
                    ),
                );
            } else {
                aggregate_attrs.extend(ee.key[0].template.binders().map(|b| leak(&b.name)));
            }
            let sk: Vec<&str> = ee.key[1]
                .template
                .binders()
                .map(|b| b.name.as_str())
                .collect();
            let shaped = if owned {
                extends(&ee.key[1].template)
                    && sk.len() == sk_arity + 1
                    && sk.last() == Some(&SEQUENCE)
                    && matches!(ee.key[1].template.parts.last(), Some(Part::Hole(..)))
            } else {
                sk == [SEQUENCE] && prefix(&ee.key[1].template).is_some()
            };
            if !shaped {
                let example = if owned {
                    format!("`\"{}#HIST#${{{SEQUENCE}}}\"`", root_sk.source)
                } else {
                    format!("`\"HIST#${{{SEQUENCE}}}\"`")
                };
                self.err(
                    epos,
                    format!(
                        "history: entries `{}`'s {} `{}` must be {}a literal prefix and `${{{SEQUENCE}}}` (e.g. {example}): the entry's number",
                        ee.name,
                        ee.key[1].attr,
                        ee.key[1].template.source,
                        if owned { "the root's sort key, " } else { "" }
                    ),
                );
            } else if owned {
                aggregate_attrs.extend(
                    ee.key[1]
                        .template
                        .binders()
                        .take(sk_arity)
                        .map(|b| leak(&b.name)),
                );
            }
        }
        // What an entry holds is the history's: an attribute the entries
        // entity declares is written only as a constant (import16 #4: a
        // declared `__edb_v__: string` was never filled).
        let written = [
            "id",
            SEQUENCE,
            "description",
            "createdAt",
            "snapshot",
            "snapshotOmitted",
        ];
        for a in &ee.attrs {
            let constant = ee.constants().any(|(n, _)| n == a.name);
            if !constant && !written.contains(&a.name) && !aggregate_attrs.contains(&a.name) {
                self.err(
                    epos,
                    format!(
                        "history: entries `{}`: `{}` is written on no entry (an entry holds `id`, `sequence`, `description`, `createdAt`, `snapshot` and its aggregate's id): an attribute every entry carries is a constant, a required one-value enum (`{}: [\"1\"]`)",
                        ee.name, a.name, a.name
                    ),
                );
            }
        }
        let digits = ent.digits.as_ref().map(|d| d.value).unwrap_or(8);
        if !(1..=18).contains(&digits) {
            let d = ent.digits.as_ref().expect("given when out of range");
            self.err(at(d), format!("history: digits {digits}: 1 to 18"));
        }
        let imported = ent
            .imported
            .as_ref()
            .map(|s| s.value.as_str())
            .unwrap_or("Imported");
        let processor = h
            .processor
            .as_ref()
            .map(|p| p.value.as_str())
            .unwrap_or("history");
        if !processor
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
            || processor.is_empty()
        {
            let pos = h.processor.as_ref().map(at).unwrap_or(at(raw));
            self.err(
                pos,
                format!(
                    "history: processor `{processor}`: letters, digits and `-` (it names a Lambda)"
                ),
            );
        }
        if self.problems.len() > before {
            return None;
        }
        // The records the fold needs: its root's and members' (by their sort
        // key's literal prefix) and the INSERT of its adoption entries.
        let mut prefixes: Vec<&'static str> = Vec::new();
        let mut every = false;
        for e in std::iter::once(root).chain(members.iter().map(|m| m.shape.entity)) {
            match prefix(&entities[e].key[1].template) {
                Some(p) if !prefixes.contains(&p) => prefixes.push(leak(p)),
                Some(_) => {}
                None => every = true,
            }
        }
        let filter = if every {
            vec![]
        } else {
            let rules: Vec<KeyRule> = prefixes.into_iter().map(KeyRule::Prefix).collect();
            vec![
                EventFilter::key(table.sk, &rules),
                EventFilter::insert_with(
                    table.sk,
                    prefix(&ee.key[1].template).unwrap_or_default(),
                    "description",
                    imported,
                ),
            ]
        };
        Some(HistorySpec {
            processor: leak(processor),
            root: Shape {
                entity: root,
                fields: root_fields,
                excluded: root_excluded,
            },
            root_read,
            created: created.flatten(),
            updated,
            labels,
            members,
            entries,
            digits: digits as usize,
            imported: leak(imported),
            mirror: leak(mirror),
            cascade: h.cascade.as_ref().is_none_or(|c| c.value),
            root_part: leak(&root_name),
            aggregate_attrs,
            pk_arity,
            sk_arity,
            filter,
            described,
        })
    }
}

/// Whether `text` reads attribute `name` (`name`, `old.name`, `new.name`).
fn mentions(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        if !before.is_some_and(ident) && !after.is_some_and(ident) {
            return true;
        }
        from = at + name.len();
    }
    false
}

/// The problem of an `owner: other` entity `name` named as a history's
/// `part` (`the root`, `member`), whose fields (`whose`) a history folds:
/// it declares its key only, so there is nothing to fold.
fn foreign_part(part: &str, name: &str, whose: &str) -> String {
    format!("history: {part} `{name}` is `owner: other` (a key space another writer owns, declared by its key only): a history folds {whose} fields into snapshots, and `{name}` has none")
}

/// `a` or `an` before `word` (by its first letter).
fn article(word: &str) -> &'static str {
    match word.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// What deleting a history's root does to the aggregate's items, as
/// `check-model` prints it beside OK: the members a history's cascade
/// deletes are the application's own items (user15's #5: a booking moved
/// to another guest in one transaction lost its payments), so the file
/// says so where its author looks.
pub fn cascade_note(h: &HistorySpec, entities: &[Entity]) -> String {
    let root = entities[h.root.entity].name;
    let members: Vec<&str> = h
        .members
        .iter()
        .map(|m| entities[m.shape.entity].name)
        .collect();
    let head = format!(
        "history {root}: deleting {} {root} (or moving it: a delete and a put) deletes",
        article(root)
    );
    let entries = entities[h.entries].name;
    let members = members.join(" and ");
    match (members.is_empty(), h.cascade) {
        (true, _) => format!("{head} its entries ({entries} items); it has no members"),
        (false, true) => {
            format!("{head} its {members} items and its entries ({entries} items) (cascade: true)")
        }
        (false, false) => format!(
            "{head} its entries ({entries} items); its {members} items stay (cascade: false)"
        ),
    }
}
