//! What a writer entity implies: `project`, `derive`, `count` (with the
//! bindings of the target's key and their types).

use super::*;

impl Compiler<'_> {
    /// `with` bindings: every key name of the target must be bound; other
    /// names must be the target's attributes.
    pub(super) fn bindings(
        &mut self,
        with: &Ordered<Spanned<Scalar>>,
        target: &Entity,
        pos: (u64, u64),
        scope: &Scope,
        what: &str,
    ) -> Vec<(String, Value)> {
        let binders: Vec<String> = target
            .binders()
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        for b in &binders {
            if !with.0.iter().any(|(n, _)| n == b) {
                let same = if scope.has(b) {
                    format!(" (e.g. `{b}: {b}`)")
                } else if what == "count" {
                    crate::file::locate::unique_hint(with, target)
                } else {
                    String::new()
                };
                self.err(
                    pos,
                    format!(
                        "{}: {what} `{}`: `${{{b}}}` of its key is unbound: add `{b}:` under `with`{same}",
                        scope.entity, target.name
                    ),
                );
            }
        }
        let mut out = Vec::new();
        for (n, v) in &with.0 {
            if !binders.contains(n) && target.attr(n).is_none() {
                let cands: Vec<&str> = binders
                    .iter()
                    .map(String::as_str)
                    .chain(target.attrs.iter().map(|a| a.name))
                    .collect();
                let hint = suggest(n, cands).unwrap_or_default();
                self.err(
                    at(v),
                    format!(
                        "{}: `{n}` is neither a key name nor an attribute of `{}`{hint}",
                        scope.entity, target.name
                    ),
                );
                continue;
            }
            if let Some(v) = self.expression(v, scope) {
                out.push((n.clone(), v));
            }
        }
        out
    }

    pub(super) fn entity_rules(
        &mut self,
        i: usize,
        raw: &RawEntity,
        entities: &mut [Entity],
        names: &[&str],
        table: &TableDef,
        entity_type: &str,
    ) {
        let scope = self.scope(&entities[i]);
        // What a writer's checks, derives and counts may read (no sums).
        let reads = self.writer_scope(&entities[i]);
        let name = entities[i].name;
        let writer = entities[i].writer;
        if let Some(s) = &raw.starts {
            self.err(
                at(s),
                format!("{name}: `starts:` (set jobs) is reserved: not run from files yet"),
            );
        }
        let counter = entities[i].counter.is_some();
        if !writer {
            for (has, what, pos) in [
                (
                    // A counter's keys may come from its sums (`project:`).
                    raw.project.is_some() && !counter,
                    "project",
                    raw.project.as_ref().map(at),
                ),
                (!raw.derive.is_empty(), "derive", raw.derive.first().map(at)),
                (!raw.count.is_empty(), "count", raw.count.first().map(at)),
                (!raw.check.is_empty(), "check", raw.check.first().map(at)),
            ] {
                if has {
                    self.err(
                        pos.unwrap_or((1, 1)),
                        format!(
                            "{name}: a processor entity implies nothing: `{what}` belongs on a writer entity{}",
                            if what == "project" { " (or on a counter, whose keys may come from its sums); an attribute every item of a processor entity carries is a constant, a required one-value enum under its `attributes:` (`__edb_v__: [\"1\"]`)" } else { "" }
                        ),
                    );
                }
            }
        }
        let mut checks = Vec::new();
        for c in &raw.check {
            let attribute = match &c.value.attribute {
                Some(a) if !reads.has(&a.value) => {
                    let hint = suggest(&a.value, reads.names.iter().map(|(n, _)| n.as_str()))
                        .unwrap_or_default();
                    self.err(
                        at(a),
                        format!("{name}: unknown attribute `{}`{hint}", a.value),
                    );
                    continue;
                }
                Some(a) => leak(&a.value),
                None => "check",
            };
            if let Some(expr) = self.expr(&c.value.expr.value, at(&c.value.expr), 0, &reads) {
                checks.push(Check {
                    expr,
                    // Without a message, the expression says what failed
                    // (user15: a required `message` was refused in serde's
                    // words, naming no entity).
                    message: c.value.message.clone().unwrap_or_else(|| {
                        format!("fails the check `{}`", c.value.expr.value.trim())
                    }),
                    attribute,
                });
            }
        }
        let mut project = None;
        if let Some(p) = &raw.project {
            // A writer's projection is computed from the item the
            // application wrote, before any sum reaches it: never its sums.
            let scope = if writer { &reads } else { &scope };
            let when = self.condition(&p.value.when, scope).unwrap_or(None);
            let mut attrs = Vec::new();
            let owned: BTreeSet<&str> = entities[i].attrs.iter().map(|a| a.name).collect();
            for (n, v) in &p.value.attributes.value.0 {
                if n == table.pk || n == table.sk || n == entity_type {
                    self.err(
                        at(v),
                        format!("{name}: `{n}` cannot be projected (a key or the entity type)"),
                    );
                    continue;
                }
                if owned.contains(n.as_str()) {
                    self.err(at(v), format!("{name}: `{n}` is a writer attribute; a projection writes processor-owned attributes"));
                    continue;
                }
                let sums = entities[i].counter.as_ref().map_or(&[][..], |c| c.attrs);
                if entities[i].compute.is_some() && n == super::super::compute::SEQUENCE_ATTR {
                    self.err(at(v), format!("{name}: `{n}` is the processor's on an entity with `compute:` (the job raises it with each write of the values); a projection writes other attributes"));
                    continue;
                }
                if entities[i].computed().any(|c| c == n.as_str()) {
                    self.err(at(v), format!("{name}: `{n}` is computed (`compute:`); a projection writes other attributes (e.g. an index key from it)"));
                    continue;
                }
                if sums.contains(&n.as_str()) {
                    self.err(at(v), format!("{name}: `{n}` is a sum of the counter; a counter's projection writes other attributes (e.g. an index key from the sums)"));
                    continue;
                }
                if let Some(x) = self.template(v, scope) {
                    self.index_key_limit(name, n, &x, at(v), table);
                    attrs.push((leak(n), x));
                }
            }
            let mut sources: Vec<&'static str> = Vec::new();
            let sums = entities[i].counter.as_ref().map_or(&[][..], |c| c.attrs);
            let mut read = |e: &Expr| {
                for v in &e.variables {
                    let source = entities[i]
                        .attr(v)
                        .map(|a| a.name)
                        .or_else(|| sums.iter().copied().find(|s| *s == v.as_str()))
                        .or_else(|| entities[i].computed().find(|s| *s == v.as_str()));
                    if let Some(a) = source {
                        if !sources.contains(&a) {
                            sources.push(a);
                        }
                    }
                }
            };
            if let Some(w) = &when {
                read(w);
            }
            for (_, v) in &attrs {
                for p in &v.0 {
                    if let Part::Hole(e, _) = p {
                        read(e);
                    }
                }
            }
            project = Some(Project {
                when,
                attrs,
                sources,
            });
        }
        let mut derive = Vec::new();
        for d in &raw.derive {
            let Some(t) = self.entity_ref(&d.value.entity, names, name) else {
                continue;
            };
            if entities[t].writer {
                self.err(
                    at(&d.value.entity),
                    format!(
                        "{name}: derives `{}`, {}: derived items must be `owner: processor`",
                        entities[t].name,
                        entities[t].kind_words()
                    ),
                );
                continue;
            }
            let each = self.each(&d.value.each, &entities[i], &reads);
            let reads = self.each_scope(&entities[i], each);
            let with = self.bindings(&d.value.with, &entities[t], at(d), &reads, "derive");
            self.whole_set_keyed(&d.value.with, &with, &entities[t], &reads, "derive");
            self.key_binds_each(each, &d.value.with, &entities[t], at(d), name, "derive");
            // A constant (a one-value enum) is the processor's to write.
            let constant = |a: &str| entities[t].constants().any(|(n, _)| n == a);
            for a in &entities[t].attrs {
                if !a.optional && !with.iter().any(|(n, _)| n == a.name) && !constant(a.name) {
                    self.err(
                        at(d),
                        format!("{name}: derive `{}`: its attribute `{}` is unbound: add it under `with`", entities[t].name, a.name),
                    );
                }
            }
            if !entities[t].shared {
                self.derived_key_binds_source(name, &entities[i], &entities[t], d);
            }
            let when = self.condition(&d.value.when, &reads).unwrap_or(None);
            self.optional_key_bindings(
                &d.value.with,
                &entities[i],
                &entities[t],
                when.as_ref(),
                "derive",
            );
            derive.push(DeriveRule {
                target: t,
                with,
                when,
                each,
            });
        }
        let mut count = Vec::new();
        for c in &raw.count {
            let Some(t) = self.entity_ref(&c.value.counter, names, name) else {
                continue;
            };
            let Some(counter_attrs) = entities[t].counter.as_ref().map(|c| c.attrs) else {
                self.err(
                    at(&c.value.counter),
                    format!(
                        "{name}: `{}` is not a counter (give it a `counter:` block)",
                        entities[t].name
                    ),
                );
                continue;
            };
            let each = self.each(&c.value.each, &entities[i], &reads);
            let reads = self.each_scope(&entities[i], each);
            self.key_binds_each(each, &c.value.with, &entities[t], at(c), name, "count");
            let with = if entities[t].unique.is_empty() {
                let with = self.bindings(&c.value.with, &entities[t], at(c), &reads, "count");
                self.whole_set_keyed(&c.value.with, &with, &entities[t], &reads, "count");
                self.binding_types(&c.value.with, &entities[t], &reads);
                with
            } else {
                // Counted through its identity (`unique:`).
                crate::file::locate::check_with(
                    &c.value.with,
                    &entities[t],
                    at(c),
                    &reads,
                    &mut self.problems,
                );
                let mut out = Vec::new();
                for (n, v) in &c.value.with.0 {
                    if entities[t].unique.contains(&n.as_str()) {
                        if let Some(v) = self.expression(v, &reads) {
                            out.push((n.clone(), v));
                        }
                    }
                }
                self.whole_set_keyed(&c.value.with, &out, &entities[t], &reads, "count");
                out
            };
            let mut add = Vec::new();
            for (n, v) in &c.value.add.value.0 {
                match counter_attrs.iter().find(|a| **a == n) {
                    None => {
                        let hint = suggest(n, counter_attrs.iter().copied()).unwrap_or_default();
                        self.err(
                            at(v),
                            format!(
                                "{name}: `{n}` is not an attribute of counter `{}`{hint}",
                                entities[t].name
                            ),
                        );
                    }
                    Some(a) => {
                        if let Some(x) = self.expression(v, &reads) {
                            if self.sum_is_int(&x, v, &reads, n).is_some() {
                                add.push((*a, x));
                            }
                        }
                    }
                }
            }
            let when = self.condition(&c.value.when, &reads).unwrap_or(None);
            self.optional_key_bindings(
                &c.value.with,
                &entities[i],
                &entities[t],
                when.as_ref(),
                "count",
            );
            count.push(CountRule {
                counter: t,
                with,
                add,
                when,
                each,
            });
        }
        let e = &mut entities[i];
        e.checks = checks;
        e.project = project;
        e.derive = derive;
        e.count = count;
    }

    /// A derived item of an entity that is not `shared: true` must have a
    /// key that binds every name of its source's key (each as a name bound
    /// as is under `with`, not an expression of it): otherwise two source
    /// items imply one derived item (a source moved by writing its new item
    /// before deleting the old one), and the old one's delete would take
    /// the item the new one still implies.
    fn derived_key_binds_source(
        &mut self,
        name: &str,
        source: &Entity,
        target: &Entity,
        d: &Spanned<super::super::raw::RawDerive>,
    ) {
        let bound: Vec<&str> = target
            .binders()
            .iter()
            .filter_map(|(b, _)| {
                d.value
                    .with
                    .0
                    .iter()
                    .find(|(n, _)| n == b)
                    .map(|(_, v)| v.value.0.trim())
            })
            .collect();
        let missing: Vec<&str> = source
            .binders()
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !bound.contains(n))
            .collect();
        if missing.is_empty() {
            return;
        }
        let names = missing
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        self.err(
            at(&d.value.entity),
            format!(
                "{name}: derive `{t}`: its key does not bind {names} of `{name}`'s key, so two `{name}` items can imply one `{t}` item (one moved: its new item written, then the old one deleted), and the old one's delete would take the `{t}` the new one still implies: put {names} in `{t}`'s key (bound under `with` as is), or mark `{t}` `shared: true` (it then lives while any `{name}` implies it, with the values of the one whose key sorts last)",
                t = target.name
            ),
        );
    }

    /// A projected index key (`GSI1SK: "G#${id}"`) whose fixed text alone
    /// is over DynamoDB's limit for the index's key: every item the
    /// projection writes would be refused.
    fn index_key_limit(
        &mut self,
        entity: &str,
        attr: &str,
        v: &Value,
        pos: (u64, u64),
        table: &TableDef,
    ) {
        let Some((g, partition)) = table.gsis.iter().find_map(|g| {
            (g.pk == attr)
                .then_some((g, true))
                .or((g.sk == Some(attr)).then_some((g, false)))
        }) else {
            return;
        };
        let fixed: usize =
            v.0.iter()
                .map(|p| match p {
                    Part::Lit(l) => l.len(),
                    Part::Hole(..) => 0,
                })
                .sum();
        if let Some(why) = super::shape::over_key_limit(fixed, 0, partition) {
            let what = if partition { "partition" } else { "sort" };
            self.err(
                pos,
                format!(
                    "{entity}: `{attr}` ({what} key of {}): {why}: every `{entity}` item the projection writes would be bad input; shorten its fixed text",
                    g.name
                ),
            );
        }
    }

    /// A count's `add:` value must be an int: a template (text) or an
    /// expression of another declared type would make every item bad input.
    fn sum_is_int(
        &mut self,
        x: &Value,
        v: &Spanned<Scalar>,
        scope: &Scope,
        attr: &str,
    ) -> Option<()> {
        let what = format!("`add: {{ {attr}: ... }}` (a sum)");
        match x.0.as_slice() {
            [Part::Hole(e, _)] if !v.value.0.contains("${") => {
                self.expect(e, at(v), scope, crate::file::typecheck::T::Int, &what)
            }
            _ => {
                self.err(
                    at(v),
                    format!(
                        "{}: {what} must be an int expression (`1`, `estimate`, `status == 'open' ? 1 : 0`), not a template",
                        scope.entity
                    ),
                );
                None
            }
        }
    }

    /// A key name of the target bound to an optional attribute of the
    /// source, with no `when` reading it: an item without the attribute
    /// would leave the target's key empty, and the whole item (its other
    /// counts and projections too) would be bad input at run time
    /// (user11 #4b). Refused, saying to guard it.
    fn optional_key_bindings(
        &mut self,
        with: &Ordered<Spanned<Scalar>>,
        source: &Entity,
        target: &Entity,
        when: Option<&Expr>,
        what: &str,
    ) {
        let keyed: Vec<&str> = target.binders().into_iter().map(|(b, _)| b).collect();
        for (n, v) in &with.0 {
            let src = v.value.0.trim();
            let Some(a) = source.attr(src).filter(|a| a.optional) else {
                continue;
            };
            if !keyed.contains(&n.as_str())
                || when.is_some_and(|w| w.variables.iter().any(|x| x == src))
            {
                continue;
            }
            self.err(
                at(v),
                format!(
                    "{}: {what} `{}`: `{n}` of its key is bound to `{src}`, which is optional: an item without it would leave the key empty and be bad input as a whole (its other counts and projections too); add `when: \"{src} != null\"`",
                    source.name, target.name, src = a.name
                ),
            );
        }
    }

    /// `with` values whose declared type may not be what the target's key
    /// accepts (`${userId:ulid}` bound to a `string`): the counter's key
    /// would reject what the source computes. Checked where both types are
    /// known (the value is a name of the source with a declared type).
    pub(super) fn binding_types(
        &mut self,
        with: &Ordered<Spanned<Scalar>>,
        target: &Entity,
        scope: &Scope,
    ) {
        for (n, v) in &with.0 {
            let Some((_, format)) = target.binders().into_iter().find(|(b, _)| *b == n.as_str())
            else {
                continue;
            };
            let Some(want) = target
                .attr(n)
                .map(|a| a.ty.clone())
                .or_else(|| format.and_then(|f| crate::file::formats::named(f, &self.formats)))
            else {
                continue;
            };
            let src = v.value.0.trim();
            // An `each:` element: a key format that rejects one makes the
            // source bad input at run time.
            let Some(have) = scope.key_fit(src) else {
                continue;
            };
            // A whole set or list: `whole_set_keyed` says to write `each:`.
            if matches!(have, Ty::Set | Ty::List) {
                continue;
            }
            if !fits(have, &want) {
                self.err(
                    at(v),
                    format!(
                        "{}: `{n}` of `{}`'s key must be {}, but `{src}` is {}: the counter's key would reject it; declare `{src}` as {} or bind a value that is one",
                        scope.entity,
                        target.name,
                        ty_name(&want),
                        ty_name(have),
                        ty_name(&want)
                    ),
                );
            }
        }
    }
}
