//! The compiler's pass over a whole file: the version, the table, the
//! formats, each entity's shape and what it implies, then the blocks that
//! read them (sets, once, history, compute, queries), in that order.

use super::*;

impl Compiler<'_> {
    /// A GSI's `project:` (default `all`): `keys`, or a list of attribute
    /// names (the keys in it are dropped: every index item has them).
    fn gsi_projection(
        &mut self,
        g: &crate::file::raw::RawGsi,
        t: &crate::file::raw::RawTable,
    ) -> GsiProjection {
        use crate::file::raw::RawGsiProject;
        let Some(p) = &g.project else {
            return GsiProjection::All;
        };
        let index = &g.name.value;
        match &p.value {
            RawGsiProject::Named(w) if w == "all" => GsiProjection::All,
            RawGsiProject::Named(w) if w == "keys" => GsiProjection::KeysOnly,
            RawGsiProject::Named(w) => {
                let hint = suggest(w, ["all", "keys"]).unwrap_or_default();
                self.err(
                    at(p),
                    format!("index `{index}`: project `{w}`{hint}: `all`, `keys`, or a list of the attributes its items carry besides the keys"),
                );
                GsiProjection::All
            }
            RawGsiProject::Attrs(attrs) if attrs.is_empty() => {
                self.err(
                    at(p),
                    format!(
                        "index `{index}`: project `[]`: write `keys` for an index of the keys only"
                    ),
                );
                GsiProjection::KeysOnly
            }
            RawGsiProject::Attrs(attrs) => {
                if attrs.iter().any(String::is_empty) {
                    self.err(
                        at(p),
                        format!("index `{index}`: project: an empty attribute name"),
                    );
                }
                let attrs: Vec<&'static str> = attrs.iter().map(|a| leak(a)).collect();
                let keys = [
                    t.pk.value.as_str(),
                    t.sk.value.as_str(),
                    g.pk.value.as_str(),
                    g.sk.as_ref().unwrap_or(&g.pk).value.as_str(),
                ];
                GsiProjection::include(&attrs, keys)
            }
        }
    }

    pub(super) fn file(&mut self, raw: RawFile, default_name: &str) -> Option<FileModel> {
        if raw.jobstream.value != 1 {
            self.err(
                at(&raw.jobstream),
                format!(
                    "unsupported format version {} (this jobstream reads `jobstream: 1`)",
                    raw.jobstream.value
                ),
            );
        }
        let t = &raw.table.value;
        let entity_type = t
            .entity_type
            .as_ref()
            .map(|s| s.value.as_str())
            .unwrap_or("type");
        let writer_type_checked = match &t.writer_type {
            None => true,
            Some(s) if s.value == "checked" => true,
            Some(s) if s.value == "free" => false,
            Some(s) => {
                self.err(
                    at(s),
                    format!("writer_type `{}`: `checked` or `free`", s.value),
                );
                true
            }
        };
        if t.pk.value == t.sk.value {
            self.err(at(&t.sk), "the sort key must differ from the partition key");
        }
        // What CreateTable would refuse, said here rather than by the engine.
        for (what, name) in std::iter::once(("table", &t.name))
            .chain(t.gsis.iter().map(|g| ("index", &g.value.name)))
        {
            let n = &name.value;
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
            if !(3..=255).contains(&n.len()) || !n.chars().all(allowed) {
                self.err(
                    at(name),
                    format!("{what} name `{n}`: DynamoDB takes 3 to 255 characters of a-z, A-Z, 0-9, `_`, `-` and `.`"),
                );
            }
        }
        let table = TableDef {
            name: leak(&t.name.value),
            pk: leak(&t.pk.value),
            sk: leak(&t.sk.value),
            gsis: t
                .gsis
                .iter()
                .map(|g| Gsi {
                    name: leak(&g.value.name.value),
                    pk: leak(&g.value.pk.value),
                    sk: g.value.sk.as_ref().map(|s| leak(&s.value)),
                    projection: self.gsi_projection(&g.value, t),
                })
                .collect(),
            ttl_attribute: t.ttl.as_ref().map(|s| leak(&s.value)),
            stream: true,
        };
        let name = raw
            .name
            .as_ref()
            .map(|s| s.value.clone())
            .unwrap_or_else(|| default_name.to_string());
        let about = raw
            .about
            .clone()
            .unwrap_or_else(|| format!("model file {name}"));
        let env = match Env::new() {
            Ok(e) => e,
            Err(e) => {
                self.err((1, 1), format!("expression built-ins: {e}"));
                return None;
            }
        };
        self.formats = crate::file::formats::compile(raw.formats.as_ref(), &mut self.problems);
        let raws = &raw.entities.value.0;
        self.stamp_clashes(t, raws, entity_type);
        if raws.is_empty() {
            self.err(at(&raw.entities), "no entities");
        }
        let names: Vec<&str> = raws.iter().map(|(n, _)| n.as_str()).collect();
        // Pass 1: keys and attributes (what every rule may refer to).
        let mut entities: Vec<Entity> = raws
            .iter()
            .map(|(n, e)| {
                let stamp = super::shape::Stamp {
                    attr: entity_type,
                    checked: writer_type_checked,
                };
                self.entity_shape(n, e, &table, stamp)
            })
            .collect();
        for (e, (_, r)) in entities.iter_mut().zip(raws) {
            let declared: Vec<&str> = e
                .attrs
                .iter()
                .map(|a| a.name)
                .chain(
                    e.key
                        .iter()
                        .flat_map(|k| k.template.binders())
                        .map(|b| b.name.as_str()),
                )
                .collect();
            e.counter = self.counter(e.name, &declared, &r.value);
            e.unique = crate::file::locate::unique(e, &r.value, &mut self.problems);
        }
        // Pass 1b: computed attributes (read by the rules below).
        for (i, (_, r)) in raws.iter().enumerate() {
            if let Some(c) = &r.value.compute {
                let compiled = crate::file::compute::compile(c, i, &entities, &mut self.problems);
                entities[i].compute = compiled;
            }
        }
        // Pass 2: what each entity implies.
        for (i, (_, e)) in raws.iter().enumerate() {
            self.entity_rules(i, &e.value, &mut entities, &names, &table, entity_type);
        }
        // Pass 2b: a compute job writes the projection with the values.
        for e in &mut entities {
            if let (Some(c), Some(p)) = (&mut e.compute, &e.project) {
                c.reads_projection(&p.sources);
            }
        }
        self.overlaps(&mut entities, raws);
        self.derive_collisions(&entities, raws);
        self.uncounted(&entities, raws);
        let sets = match &raw.sets {
            Some(s) => crate::file::sets::compile(
                &s.value,
                raw.once.as_ref().map(|o| &o.value),
                &entities,
                &table,
                &mut self.problems,
            ),
            None => vec![],
        };
        // What `each:` rules may take of an item's transaction.
        for i in 0..entities.len() {
            let indexed = sets
                .iter()
                .flat_map(|s| &s.facts)
                .filter(|f| f.entity == i && f.via_index.is_some())
                .count();
            entities[i].each = Compiler::each_budget(&entities, i, indexed);
        }
        let history = raw
            .history
            .as_ref()
            .and_then(|h| self.history(h, &entities, &table));
        let once = match &raw.once {
            Some(o) => {
                let set_names: Vec<&str> = sets.iter().map(|s| s.name).collect();
                crate::file::once::compile(&o.value, &entities, &set_names, &mut self.problems)
            }
            None => vec![],
        };
        self.queue_collisions(&entities, &raw, &sets, &once);
        let queries = match &raw.queries {
            Some(q) => crate::file::queries::compile(
                &q.value,
                &entities,
                &table,
                &self.formats,
                self.source,
                &mut self.problems,
            ),
            None => vec![],
        };
        Some(FileModel {
            once,
            sets,
            history,
            queries,
            name: leak(&name),
            about: leak(&about),
            keys: Box::leak(vec![table.pk, table.sk].into_boxed_slice()),
            table,
            entity_type: leak(entity_type),
            writer_type_checked,
            entities,
            env,
            formats: self.formats.clone(),
        })
    }
}
