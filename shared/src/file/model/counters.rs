//! Counters (`counter:`), counters nothing counts into, and key templates
//! two entities both match.

use super::*;
use crate::file::template::Binder;

impl Compiler<'_> {
    /// A `counter:` block on an entity no `count:` rule counts into: the
    /// processor would only ever write zeros.
    pub(super) fn uncounted(&mut self, entities: &[Entity], raws: &[(String, Spanned<RawEntity>)]) {
        for (i, e) in entities.iter().enumerate() {
            let counted = entities
                .iter()
                .flat_map(|w| &w.count)
                .any(|c| c.counter == i);
            if e.counter.is_none() || counted {
                continue;
            }
            if let Some(c) = &raws[i].1.value.counter {
                self.err(
                    at(c),
                    format!(
                        "{}: a `counter:` block, but nothing counts into it: add `count: [{{ counter: {}, with: {{...}}, add: {{...}} }}]` to the writer entity whose items it sums, or remove the block",
                        e.name, e.name
                    ),
                );
            }
        }
    }

    /// A `counter:` block.
    pub(super) fn counter(
        &mut self,
        name: &str,
        declared: &[&str],
        raw: &RawEntity,
    ) -> Option<CounterDef> {
        raw.counter.as_ref().map(|c| {
            let created_by_processor = match &c.value.created_by {
                None => false,
                Some(s) if s.value == "writer" => false,
                Some(s) if s.value == "processor" => true,
                Some(s) => {
                    self.err(
                        at(s),
                        format!("{name}: created_by `{}`: `writer` or `processor`", s.value),
                    );
                    false
                }
            };
            // No writer writes a processor entity's items, so a counter
            // waiting for the writer's item would wait forever, every count
            // held back in the ledger (user15 #7).
            let processor_owned = raw.owner.as_ref().is_some_and(|o| o.value == "processor");
            if processor_owned && !created_by_processor {
                let (where_, said) = match &c.value.created_by {
                    Some(s) => (at(s), "`created_by: writer`"),
                    None => (at(c), "no `created_by:` (the default is `writer`)"),
                };
                self.err(
                    where_,
                    format!("{name}: an `owner: processor` entity's counter with {said} would never exist: no writer writes a processor's item, so every count into it would wait; add `created_by: processor` to its `counter:` (or make the entity the writer's)"),
                );
            }
            let attrs: Vec<&'static str> = c
                .value
                .attributes
                .value
                .iter()
                .map(|a| leak(&a.value))
                .collect();
            if attrs.is_empty() {
                self.err(
                    at(&c.value.attributes),
                    format!("{name}: a counter needs at least one attribute"),
                );
            }
            // A sum is the processor's: one named like an attribute the
            // writer declares (or a key name) would be overwritten by each
            // sync, taking the application's writes of it back.
            for a in &c.value.attributes.value {
                if declared.iter().any(|d| *d == a.value) {
                    self.err(
                        at(a),
                        format!("{name}: counter sum `{}` is a writer attribute or a key name of `{name}`: a sum is the processor's (each sync would overwrite what the application writes there); give the sum another name, or remove `{}` from `attributes:`", a.value, a.value),
                    );
                }
            }
            CounterDef {
                attrs: Box::leak(attrs.into_boxed_slice()),
                created_by_processor,
                remove_at_zero: c.value.remove_at_zero,
            }
        })
    }

    /// Two entities whose key templates both match one key: an error with an
    /// example key, whichever of the two is declared first (the pair is
    /// decided symmetrically: each template's examples are tried against the
    /// other, binders holding the other template's literals), reported at the
    /// key of the one declared later.
    pub(super) fn overlaps(
        &mut self,
        entities: &mut [Entity],
        raws: &[(String, Spanned<RawEntity>)],
    ) {
        for i in 0..entities.len() {
            for j in i + 1..entities.len() {
                let (a, b) = (&entities[i], &entities[j]);
                if a.key.len() != 2 || b.key.len() != 2 {
                    continue;
                }
                // Keys apart by a literal share no key: neither the search
                // below nor its textual second (quadratic in the entities,
                // so cheap first: hostile13 #10).
                if a.key
                    .iter()
                    .zip(&b.key)
                    .any(|(x, y)| x.template.disjoint(&y.template))
                {
                    continue;
                }
                let formats = &self.formats;
                let fits_a = |x: &Binder, v: &str| binder_fits(a, x, v, formats);
                let fits_b = |x: &Binder, v: &str| binder_fits(b, x, v, formats);
                let typed: Option<Vec<String>> = a
                    .key
                    .iter()
                    .zip(&b.key)
                    .map(|(x, y)| x.template.overlap_fitting(&y.template, &fits_a, &fits_b))
                    .collect();
                let Some(example) = typed else {
                    // Told apart by their values' types only: a key's
                    // entity is found checking them.
                    let textual = a
                        .key
                        .iter()
                        .zip(&b.key)
                        .all(|(x, y)| x.template.overlap(&y.template).is_some());
                    if textual {
                        entities[i].by_type = true;
                        entities[j].by_type = true;
                    }
                    continue;
                };
                let first_line = raws[i].1.value.key.referenced.line();
                // Templates the same but for their names: no binder holds
                // a literal of the other, so typing one cannot part them
                // (import16 #2); what can is said instead.
                let same = a
                    .key
                    .iter()
                    .zip(&b.key)
                    .all(|(x, y)| x.template.same_shape(&y.template));
                let way_out = if same {
                    "their templates are the same but for the names they bind, so no binder holds a literal of the other that a type could exclude, and a model file tells an item's entity by its key: make their templates differ by a literal, or, where the application tells them apart by its type field alone, declare one entity with the attributes of both (those not in both optional) and set `writer_type: free` (its items carry either type name)".to_string()
                } else {
                    "make their templates differ by a literal, or, to keep the keys as they are, type the binder that holds the other's literal so that it cannot (`${id:ulid}`, or a format whose pattern excludes the separator: `formats: { key_part: { pattern: \"^[^#]+$\" } }` and `${id:key_part}`)".to_string()
                };
                self.err(
                    at(&raws[j].1.value.key),
                    format!(
                        "`{}` (line {first_line}) and `{}` both match the key {}={}, {}={} (an item with it would be read as `{}`): {way_out}",
                        a.name, b.name, a.key[0].attr, example[0], a.key[1].attr, example[1], a.name
                    ),
                );
            }
        }
    }
}

/// Whether `v` is a value binder `b` of entity `e`'s key may hold: of its
/// format, else of the type of `e`'s attribute of its name.
pub(in crate::file) fn binder_fits(
    e: &Entity,
    b: &Binder,
    v: &str,
    formats: &[&'static super::super::formats::Format],
) -> bool {
    binder_check(e, b, v, formats).is_ok()
}

/// [`binder_fits`], with why not.
pub(in crate::file) fn binder_check(
    e: &Entity,
    b: &Binder,
    v: &str,
    formats: &[&'static super::super::formats::Format],
) -> Result<(), crate::item::AttrError> {
    let ty = match &b.format {
        Some(f) => super::super::formats::named(f, formats),
        None => e.attr(&b.name).map(|a| a.ty.clone()),
    };
    ty.map_or(Ok(()), |ty| super::super::rules::check_str(&b.name, v, &ty))
}
