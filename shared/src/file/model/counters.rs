//! Counters (`counter:`), counters nothing counts into, and key templates
//! two entities both match.

use super::*;

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
    pub(super) fn counter(&mut self, name: &str, raw: &RawEntity) -> Option<CounterDef> {
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
    pub(super) fn overlaps(&mut self, entities: &[Entity], raws: &[(String, Spanned<RawEntity>)]) {
        for (i, a) in entities.iter().enumerate() {
            for (j, b) in entities.iter().enumerate().skip(i + 1) {
                if a.key.len() != 2 || b.key.len() != 2 {
                    continue;
                }
                let Some(example) = a
                    .key
                    .iter()
                    .zip(&b.key)
                    .map(|(x, y)| x.template.overlap(&y.template))
                    .collect::<Option<Vec<String>>>()
                else {
                    continue;
                };
                let first_line = raws[i].1.value.key.referenced.line();
                self.err(
                    at(&raws[j].1.value.key),
                    format!(
                        "`{}` (line {first_line}) and `{}` both match the key {}={}, {}={} (an item with it would be read as `{}`): make their templates differ by a literal",
                        a.name, b.name, a.key[0].attr, example[0], a.key[1].attr, example[1], a.name
                    ),
                );
            }
        }
    }
}
