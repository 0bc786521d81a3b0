//! An entity's shape: its key templates, attributes and types, checks.

use super::*;

impl Compiler<'_> {
    pub(super) fn entity_shape(
        &mut self,
        name: &str,
        e: &Spanned<RawEntity>,
        table: &TableDef,
        stamp: Stamp<'_>,
    ) -> Entity {
        let raw = &e.value;
        if let Some(why) = control_name("entity", name) {
            self.err(at(e), why);
        }
        let (writer, foreign) = match &raw.owner {
            None => (true, false),
            Some(o) if o.value == "writer" => (true, false),
            Some(o) if o.value == "processor" => (false, false),
            Some(o) if o.value == "other" => (true, true),
            Some(o) => {
                let hint = suggest(&o.value, ["writer", "processor", "other"]).unwrap_or_default();
                self.err(
                    at(o),
                    format!(
                        "owner `{}`: `writer`, `processor` or `other`{hint}",
                        o.value
                    ),
                );
                (true, false)
            }
        };
        // Another writer's key space: read and left alone, so it declares
        // nothing that would read or check its items.
        if let (true, Some(o)) = (foreign, &raw.owner) {
            let declared = [
                ("attributes", !raw.attributes.0.is_empty()),
                ("check", !raw.check.is_empty()),
                ("project", raw.project.is_some()),
                ("derive", !raw.derive.is_empty()),
                ("count", !raw.count.is_empty()),
                ("counter", raw.counter.is_some()),
                ("unique", raw.unique.is_some()),
                ("compute", raw.compute.is_some()),
                ("shared", raw.shared),
            ];
            for (what, _) in declared.iter().filter(|(_, d)| *d) {
                self.err(
                    at(o),
                    format!("{name}: `owner: other` is a key space another writer owns, read and left alone: it declares its key only, not `{what}`"),
                );
            }
        }
        let mut key = Vec::new();
        for want in [table.pk, table.sk] {
            match raw.key.value.0.iter().find(|(k, _)| k == want) {
                Some((_, t)) => match KeyTemplate::parse(&t.value.0) {
                    Ok(template) => {
                        let partition = want == table.pk;
                        let fixed: usize = template
                            .parts
                            .iter()
                            .map(|p| match p {
                                Part::Lit(l) => l.len(),
                                Part::Hole(..) => 0,
                            })
                            .sum();
                        let holes = template.binders().count();
                        if let Some(why) = over_key_limit(fixed, holes, partition) {
                            self.err(
                                at(t),
                                format!("{name}: key {want}: {why}: no `{name}` item could be written; shorten its fixed text"),
                            );
                        }
                        key.push(KeyPart {
                            attr: want,
                            template,
                        })
                    }
                    Err((off, msg)) => {
                        let pos = self.inner(at(t), off);
                        self.err(pos, format!("{name}: key {want}: {msg}"));
                    }
                },
                None => self.err(
                    at(&raw.key),
                    format!("{name}: the key has no `{want}` template"),
                ),
            }
        }
        for (k, t) in &raw.key.value.0 {
            if k != table.pk && k != table.sk {
                let hint = suggest(k, [table.pk, table.sk]).unwrap_or_default();
                self.err(
                    at(t),
                    format!("{name}: `{k}` is not a key attribute of the table{hint}"),
                );
            }
        }
        let mut attrs = Vec::new();
        for (n, spec) in &raw.attributes.0 {
            let (n, name_optional) = match n.strip_suffix('?') {
                Some(n) => (n, true),
                None => (n.as_str(), false),
            };
            if let Some(why) = control_name("attribute", n) {
                self.err(at(spec), format!("{}: {why}", name.escape_debug()));
            }
            let (ty, optional) = match &spec.value {
                AttrSpec::Enum(v) if v.is_empty() => {
                    self.err(
                        at(spec),
                        format!("{name}.{n}: an enum needs at least one value"),
                    );
                    continue;
                }
                AttrSpec::Enum(v) => match enum_type(v) {
                    Some(ty) => (ty, false),
                    None => {
                        self.err(
                            at(spec),
                            format!("{name}.{n}: an enum's values are all strings, all integers or all booleans (quote a value to make it a string)"),
                        );
                        continue;
                    }
                },
                AttrSpec::Named(t) => {
                    let (t, opt) = match t.strip_suffix('?') {
                        Some(t) => (t, true),
                        None => (t.as_str(), false),
                    };
                    match crate::file::formats::named(t, &self.formats) {
                        Some(ty) => (ty, opt),
                        None => {
                            let hint = crate::file::formats::hint(t, &self.formats);
                            self.err(
                                at(spec),
                                format!(
                                    "{name}.{n}: unknown type `{t}`{hint} (one of {}, a format of `formats:`, or a list of values)",
                                    crate::file::formats::names(&self.formats).join(", ")
                                ),
                            );
                            // Declared anyway, of no known type: no second
                            // error where it is read.
                            (Ty::Unknown, opt)
                        }
                    }
                }
            };
            if [table.pk, table.sk].contains(&n) {
                self.err(
                    at(spec),
                    format!("{name}: `{n}` is a key attribute: its template says what it holds"),
                );
                continue;
            }
            if let Some(why) = stamp.clash(n, name, writer && !foreign) {
                self.err(at(spec), format!("{name}.{n}: {why}"));
                continue;
            }
            // DynamoDB's TTL reads a number (epoch seconds) and ignores an
            // item whose TTL attribute is anything else: it never expires.
            if table.ttl_attribute == Some(n)
                && !matches!(ty, Ty::Int | Ty::IntEnum(_) | Ty::Number)
            {
                self.err(
                    at(spec),
                    format!(
                        "{name}.{n}: `{n}` is the table's TTL attribute, which DynamoDB reads as a number of epoch seconds (an item whose `{n}` is a {} never expires): declare it `int`",
                        ty_name(&ty)
                    ),
                );
            }
            attrs.push(Attr {
                name: leak(n),
                ty,
                optional: optional || name_optional,
            });
        }
        // Binder formats must be types; binders named like attributes take
        // the attribute's type.
        for k in &key {
            for b in k.template.binders() {
                if let Some(f) = &b.format {
                    if crate::file::formats::named(f, &self.formats).is_none() {
                        let hint = crate::file::formats::hint(f, &self.formats);
                        let pos = raw
                            .key
                            .value
                            .0
                            .iter()
                            .find(|(n, _)| n == k.attr)
                            .map(|(_, t)| at(t))
                            .unwrap_or(at(&raw.key));
                        self.err(
                            pos,
                            format!("{name}: unknown format `{f}` of `${{{}}}`{hint}", b.name),
                        );
                    }
                }
            }
        }
        Entity {
            name: leak(name),
            writer,
            foreign,
            shared: raw.shared,
            key,
            attrs,
            checks: vec![],
            project: None,
            derive: vec![],
            count: vec![],
            counter: None,
            unique: vec![],
            by_type: false,
            compute: None,
            each: None,
        }
    }
}

/// The table's entity-type attribute (`table.entity_type`) and whether a
/// writer's items must carry their entity's name there (`writer_type:
/// checked`).
#[derive(Clone, Copy)]
pub(super) struct Stamp<'a> {
    pub(super) attr: &'a str,
    pub(super) checked: bool,
}

impl Stamp<'_> {
    /// Why entity `entity` (a writer's, when `writer`) cannot declare the
    /// attribute `n`: the stamp holds the entity's name, checked on a
    /// writer's item (any other declared type makes every item bad input)
    /// and written by the processor onto its own (overwriting what a
    /// derive binds there).
    fn clash(&self, n: &str, entity: &str, writer: bool) -> Option<String> {
        if n != self.attr || (writer && !self.checked) {
            return None;
        }
        let a = self.attr;
        Some(if writer {
            format!(
                "`{a}` is the table's `entity_type`, which a `{entity}` item carries as `{a}: {entity}` (`writer_type: checked`): it is checked against the key and holds nothing else, so it is no attribute to declare; remove it from `attributes:`, or, if the application's `{a}` is data of its own, name the stamp otherwise (`table: {{ entity_type: ... }}`) or set `writer_type: free`"
            )
        } else {
            format!(
                "`{a}` is the table's `entity_type`, which the processor stamps `{a}: {entity}` on every `{entity}` item it writes: an attribute of that name would be overwritten; name it otherwise, or name the stamp otherwise (`table: {{ entity_type: ... }}`)"
            )
        })
    }
}

impl Compiler<'_> {
    /// The table's attribute names printable (see [`control_name`]), and
    /// the names the entity-type stamp collides with besides an attribute's
    /// (see [`Stamp::clash`]): the table's keys and TTL attribute, a
    /// counter's sum, a computed value. The processor writes each of them
    /// onto items it also stamps (or a checked writer's item carries the
    /// stamp there), so one would overwrite the other.
    pub(super) fn stamp_clashes(
        &mut self,
        t: &crate::file::raw::RawTable,
        raws: &[(String, Spanned<RawEntity>)],
        entity_type: &str,
    ) {
        let names = [
            Some(&t.pk),
            Some(&t.sk),
            t.ttl.as_ref(),
            t.entity_type.as_ref(),
        ]
        .into_iter()
        .flatten()
        .chain(t.gsis.iter().flat_map(|g| {
            [Some(&g.value.pk), g.value.sk.as_ref()]
                .into_iter()
                .flatten()
        }));
        for n in names {
            if let Some(why) = control_name("attribute", &n.value) {
                self.err(at(n), format!("table: {why}"));
            }
        }
        let fix = "name the stamp otherwise (`table: { entity_type: ... }`)";
        if let Some(s) = &t.entity_type {
            for (key, what) in [(&t.pk, "partition key"), (&t.sk, "sort key")] {
                if key.value == s.value {
                    self.err(
                        at(s),
                        format!("`entity_type` `{}` is the table's {what}: the stamp (an entity's name) would overwrite the key of every item the processor writes; {fix}", s.value),
                    );
                }
            }
        }
        if let Some(ttl) = t.ttl.as_ref().filter(|s| s.value == entity_type) {
            self.err(
                at(ttl),
                format!("`{entity_type}` is the table's TTL attribute and its `entity_type`: DynamoDB's TTL reads a number, and the stamp is an entity's name (a string), so no item would ever expire; name the TTL attribute or the stamp otherwise"),
            );
        }
        for (name, raw) in raws {
            let sums = raw
                .value
                .counter
                .iter()
                .flat_map(|c| &c.value.attributes.value);
            for s in sums.filter(|s| s.value == entity_type) {
                self.err(
                    at(s),
                    format!("{name}: `{entity_type}` is the table's `entity_type`, and a sum of `{name}` of that name would write a number over the stamp (`{entity_type}: {name}`); give the sum another name, or {fix}"),
                );
            }
            let computed = raw
                .value
                .compute
                .iter()
                .flat_map(|c| &c.value.values.value.0);
            for (n, v) in computed.filter(|(n, _)| n == entity_type) {
                self.err(
                    at(v),
                    format!("{name}: `{n}` is the table's `entity_type`, and a value computed by `{name}` of that name would write a number over the stamp its items carry; give the value another name, or {fix}"),
                );
            }
        }
    }
}

/// Why a name the file gives cannot be: one holding a control character
/// (a line break, an escape) would forge lines or colours in every log line
/// and message that prints it (hostile13 #9).
fn control_name(what: &str, name: &str) -> Option<String> {
    name.chars().any(char::is_control).then(|| {
        format!(
            "{what} `{}`: a name holds a control character, which every log line and message naming it would print: name it with printable characters",
            name.escape_debug()
        )
    })
}

/// Why a key (or index key) value of at least `fixed` bytes of text and
/// `holes` binders (each at least one byte) can never be written: over
/// DynamoDB's limit for a partition (2048 bytes) or sort key (1024).
pub(super) fn over_key_limit(fixed: usize, holes: usize, partition: bool) -> Option<String> {
    use crate::limits::{MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES};
    let (max, what) = if partition {
        (MAX_PARTITION_KEY_BYTES, "a partition key")
    } else {
        (MAX_SORT_KEY_BYTES, "a sort key")
    };
    let least = fixed + holes;
    (least > max).then(|| {
        let parts = if holes == 0 {
            format!("{fixed} of its fixed text")
        } else {
            format!("{fixed} of its fixed text, 1 for each `${{...}}`")
        };
        format!("at least {least} bytes ({parts}), over DynamoDB's limit of {max} bytes for {what}")
    })
}
