//! The keys a rule's bindings build: a derived item's or a counter's key
//! from its `with` values, and a `unique:` counter's logical key.

use super::each::Names;
use super::expr::Val;
use super::model::{Entity, FileModel, Value};
use super::rules::KeyValues;

impl FileModel {
    /// The logical key of a `unique:` entity's counter from `with`
    /// bindings of its identity evaluated on `rec`.
    pub(super) fn located_key_for(
        &self,
        rec: &impl Names,
        target: &Entity,
        with: &[(String, Value)],
    ) -> Result<KeyValues, String> {
        let mut values = Vec::with_capacity(target.unique.len());
        for u in &target.unique {
            let (_, v) = with
                .iter()
                .find(|(n, _)| n == u)
                .ok_or_else(|| format!("`{u}` is unbound"))?;
            let v = self.eval(rec, v)?.render();
            if v.is_empty() {
                return Err(format!("`{u}` of {}'s identity is empty", target.name));
            }
            values.push(v);
        }
        Ok(super::locate::logical_key(
            self.key_names(),
            target,
            &values,
        ))
    }

    /// The key of entity `target` from `with` bindings evaluated on `rec`.
    pub(super) fn key_for(
        &self,
        rec: &impl Names,
        target: &Entity,
        with: &[(String, Value)],
    ) -> Result<(KeyValues, Vec<(String, Val)>), String> {
        let mut bound: Vec<(String, Val)> = Vec::with_capacity(with.len());
        for (n, v) in with {
            bound.push((n.clone(), self.eval(rec, v)?));
        }
        Ok((self.key_of_bound(target, &bound)?, bound))
    }

    /// The key of entity `target` from the values `bound` by name: every
    /// binder bound and not empty.
    pub(super) fn key_of_bound(
        &self,
        target: &Entity,
        bound: &[(String, Val)],
    ) -> Result<KeyValues, String> {
        let mut key = Vec::with_capacity(2);
        for k in &target.key {
            let mut vals = Vec::new();
            for b in k.template.binders() {
                let v = bound
                    .iter()
                    .find(|(n, _)| *n == b.name)
                    .map(|(_, v)| self.key_part(b.format.as_deref(), v.render()))
                    .ok_or_else(|| format!("`{}` is unbound", b.name))?;
                if v.is_empty() {
                    return Err(format!("`{}` of {}'s key is empty", b.name, target.name));
                }
                vals.push(v);
            }
            key.push((k.attr, k.template.build(&vals)));
        }
        Ok(key)
    }
}
