//! [`FoldRules`] of a file's `history:` block: what the fold engine asks
//! of the rules (classifying a record, folding it into the aggregate's
//! state, the entries and snapshots it writes, the mirror and its guard,
//! the cascade, adoption and restates), from [`FileHistory`]'s declarations.

use super::*;

impl FoldRules for FileHistory {
    fn key_names(&self) -> &'static [&'static str] {
        self.0.keys
    }

    fn partition(&self, aggregate: &str) -> (&'static str, String) {
        (self.0.table.pk, self.pk(aggregate))
    }

    fn sort_prefix(&self, aggregate: &str) -> Option<(&'static str, String)> {
        self.root_sk(aggregate).map(|sk| (self.0.table.sk, sk))
    }

    fn is_of(&self, aggregate: &str, item: &Item) -> bool {
        if self.spec().sk_arity == 0 {
            return true;
        }
        self.classify(item)
            .ok()
            .and_then(|(_, pk, sk)| self.aggregate_of(pk, sk))
            .is_some_and(|a| a == aggregate)
    }

    fn aggregate(&self, change: &Change) -> Result<Option<String>, InputError> {
        let image = change.latest_image().unwrap_or(&change.keys);
        let (role, pk, sk) = self.classify(image)?;
        Ok(match role {
            Role::Root | Role::Member(_) => self.aggregate_of(pk, sk),
            Role::Entry | Role::Other => None,
        })
    }

    fn adoption_record(&self, change: &Change) -> Option<AdoptionRecord> {
        // Asked of every record: only an INSERT's image is classified.
        if change.kind != ChangeKind::Insert {
            return None;
        }
        let new = change.new.as_ref()?;
        let (role, pk, sk) = self.classify(new).ok()?;
        let is_adoption = role == Role::Entry
            && new.opt_s("description").ok().flatten() == Some(self.spec().imported);
        is_adoption.then(|| AdoptionRecord {
            aggregate: self.aggregate_of(pk, sk).unwrap_or_default(),
            sequence: new.opt_i64(SEQUENCE).ok().flatten().unwrap_or(0).max(0) as u64,
            id: new
                .opt_s("id")
                .ok()
                .flatten()
                .unwrap_or_default()
                .to_string(),
        })
    }

    fn starts_aggregate(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Insert && self.role_of(change.new.as_ref()) == Role::Root
    }

    fn removes_root(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Remove && self.role_of(change.old.as_ref()) == Role::Root
    }

    fn writes_nothing(&self, change: &Change) -> bool {
        let (ChangeKind::Modify, Some(old), Some(new)) =
            (change.kind, change.old.as_ref(), change.new.as_ref())
        else {
            return false;
        };
        // A processor sets an attribute of its own (a projection, the
        // mirror); a writer's put over the item drops them (it writes its
        // own attributes), even with every one of its own as it was: that
        // record is the writer's (DynamoDB writes one only when the put
        // changes the item; the local engine for every put).
        let sets_own = |excluded: &[&str]| {
            excluded.iter().any(|a| {
                let v = normalized(new.get(*a));
                v.is_some() && v != normalized(old.get(*a))
            })
        };
        match self.classify(new) {
            Ok((Role::Root, _, _)) => {
                sets_own(&self.spec().root.excluded) && self.writers_same(old, new)
            }
            Ok((Role::Member(i), _, _)) => {
                let shape = &self.spec().members[i].shape;
                sets_own(&shape.excluded) && self.member_writers_same(shape, old, new)
            }
            _ => false,
        }
    }

    fn cascade(&self, aggregate: &str, state: &FoldState) -> Cascade {
        let pk = self.pk(aggregate);
        let [pkn, skn] = self.0.key_names();
        let key =
            |sk: String| -> Item { [(pkn.to_string(), s(&pk)), (skn.to_string(), s(sk))].into() };
        // The removed incarnation's members as it last had them (a member
        // of a later incarnation under the same key differs and stays), and
        // its entries 1..=seq.
        // (None with `cascade: false`: the members stay as written.)
        let members = state
            .parts
            .iter()
            .filter(|_| self.spec().cascade)
            .filter(|(name, _)| name.as_str() != self.spec().root_part)
            .map(|(name, part)| CascadeDelete {
                key: key(name.clone()),
                unchanged: Some(self.member_guard(name, part)),
            });
        let entries = (1..=state.seq).map(|seq| CascadeDelete {
            key: self.entry_key(aggregate, seq),
            unchanged: None,
        });
        Cascade {
            deletes: members.chain(entries).collect(),
        }
    }

    fn cascades_members(&self) -> bool {
        self.spec().cascade
    }

    fn root_removed(&self, state: &FoldState) -> FoldState {
        let root = self.spec().root_part;
        FoldState {
            deleted: true,
            parts: state
                .parts
                .iter()
                .filter(|(name, _)| !self.spec().cascade && name.as_str() != root)
                .map(|(name, part)| (name.clone(), part.clone()))
                .collect(),
            ..FoldState::default()
        }
    }

    fn fold(
        &self,
        aggregate: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError> {
        let h = self.spec();
        let image = change.latest_image().unwrap_or(&change.keys);
        let (role, _, sk) = self.classify(image)?;
        let description = match (role, change.kind) {
            (Role::Root, ChangeKind::Remove) => {
                // The cascade deleted the entries, and the members unless
                // they stay: start afresh (with them).
                *state = self.root_removed(state);
                return Ok(FoldOutput::default());
            }
            (Role::Root, kind) => {
                let new = change
                    .new
                    .as_ref()
                    .expect("decoded INSERT/MODIFY has a new image");
                if kind == ChangeKind::Modify
                    && !state.deleted
                    && state.parts.contains_key(h.root_part)
                    && change
                        .old
                        .as_ref()
                        .is_some_and(|old| self.writers_same(old, new))
                {
                    // Only processor-owned attributes changed (a projection,
                    // a mirror): nothing the writer wrote, so nothing to
                    // fold, and a root that is bad input is not counted
                    // again (its own record was).
                    return Ok(FoldOutput::default());
                }
                self.validate(new)?;
                let was_rejected = std::mem::take(&mut state.rejected);
                if state.deleted {
                    // Members written while the root was away (the deleted
                    // incarnation's were cascaded) are the new one's.
                    *state = FoldState {
                        parts: std::mem::take(&mut state.parts),
                        ..FoldState::default()
                    };
                }
                // Valid again after bad input: the change is told from the
                // root as the history last showed it, not from the old
                // image (bad input, never folded).
                let last_valid = state
                    .parts
                    .get(h.root_part)
                    .filter(|_| was_rejected)
                    .map(|part| self.image_of_part(part, new));
                // A root whose creation was bad input (no valid state of
                // it folded): its first valid state is its creation to the
                // history, not an update of a root it never showed.
                let unshown = was_rejected && !state.parts.contains_key(h.root_part);
                let old = if unshown {
                    None
                } else {
                    last_valid.as_ref().or(change.old.as_ref())
                };
                state
                    .parts
                    .insert(h.root_part.to_string(), self.root_kept(new));
                match (kind, old) {
                    // Nothing a snapshot shows changed (e.g. the mirror this
                    // processor wrote): no entry, whatever the rules say.
                    (ChangeKind::Modify, Some(old)) if self.same_part(&h.root, old, new) => None,
                    (ChangeKind::Modify, Some(old)) => self.root_updated(old, new)?,
                    _ => Some(match &h.created {
                        Some(v) => self.describe(v, h.root.entity, None, Some(new), None, new)?,
                        None => format!("Created {}", self.0.entities[h.root.entity].name),
                    }),
                }
            }
            // A member of a deleted root (the cascade's own removals, or one
            // written before the root comes back) folds into the state
            // without an entry: there is no root (below).
            (Role::Member(i), ChangeKind::Remove) => {
                let mb = &h.members[i];
                let old = change
                    .old
                    .as_ref()
                    .expect("decoded REMOVE has an old image");
                // A member this incarnation does not have (e.g. one of a
                // deleted incarnation, removed by the cascade): no entry.
                if state.parts.remove(sk).is_none() {
                    return Ok(FoldOutput::default());
                }
                Some(match &mb.removed {
                    Some(v) => self.describe(v, mb.shape.entity, Some(old), None, None, old)?,
                    None => format!("Removed {}", self.0.entities[mb.shape.entity].name),
                })
            }
            (Role::Member(i), kind) => {
                let mb = &h.members[i];
                let e = &self.0.entities[mb.shape.entity];
                let new = change
                    .new
                    .as_ref()
                    .expect("decoded INSERT/MODIFY has a new image");
                // A MODIFY of a member this incarnation does not have that
                // changes nothing its writer wrote (a processor's
                // projection onto a member of a deleted incarnation, whose
                // cascade deletes it) is no member joining: nothing to
                // fold (user11's finding 3: "c3 joined", "c3 left" in a
                // re-created org c3 never joined).
                if !state.parts.contains_key(sk) && self.writes_nothing(change) {
                    return Ok(FoldOutput::default());
                }
                self.validate(new)?;
                // A MODIFY of a member this incarnation does not have (one
                // of a deleted incarnation overwritten under the same key)
                // adds it.
                let known = state
                    .parts
                    .insert(sk.to_string(), self.member_part(&mb.shape, new))
                    .is_some();
                match (kind, &change.old) {
                    (ChangeKind::Modify, Some(old)) if known => {
                        let mut watched: Vec<&str> = e.attrs.iter().map(|a| a.name).collect();
                        watched.extend(mb.shape.fields.iter().flatten().copied());
                        let changed = watched
                            .iter()
                            .any(|f| normalized(old.get(*f)) != normalized(new.get(*f)));
                        match (changed, &mb.updated) {
                            (false, _) => None,
                            (true, Some(v)) => Some(self.describe(
                                v,
                                mb.shape.entity,
                                Some(old),
                                Some(new),
                                None,
                                new,
                            )?),
                            (true, None) => Some(format!("Updated {}", e.name)),
                        }
                    }
                    _ => Some(match &mb.added {
                        Some(v) => self.describe(v, mb.shape.entity, None, Some(new), None, new)?,
                        None => format!("Added {}", e.name),
                    }),
                }
            }
            (Role::Entry | Role::Other, _) => return Ok(FoldOutput::default()),
        };
        // Changes of members of a root this processor has never seen fold
        // into the state but write no entry.
        let Some(description) = description.filter(|_| state.parts.contains_key(h.root_part))
        else {
            return Ok(FoldOutput::default());
        };
        state.seq += 1;
        let (item, notice) = self.entry(aggregate, state.seq, description, change, state);
        Ok(FoldOutput {
            entries: vec![item],
            notices: notice
                .map(|n| (names::SNAPSHOT_TOO_LARGE, n))
                .into_iter()
                .collect(),
        })
    }

    fn absorb(&self, state: &mut FoldState, change: &Change) -> Result<(), InputError> {
        let h = self.spec();
        let image = change.latest_image().unwrap_or(&change.keys);
        let (role, _, sk) = self.classify(image)?;
        let part = match role {
            Role::Root => h.root_part.to_string(),
            Role::Member(_) => sk.to_string(),
            Role::Entry | Role::Other => return Ok(()),
        };
        match &change.new {
            None => {
                state.parts.remove(&part);
            }
            Some(new) => {
                self.validate(new)?;
                state.rejected &= role != Role::Root;
                let kept = match role {
                    Role::Member(i) => self.member_part(&h.members[i].shape, new),
                    // Entries and other items returned above.
                    _ => self.root_kept(new),
                };
                state.parts.insert(part, kept);
            }
        }
        Ok(())
    }

    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)> {
        let root = &self.0.entities[self.spec().root.entity];
        if let Some(sk) = self.root_sk(aggregate) {
            let key: Item = [
                (root.key[0].attr.to_string(), s(self.pk(aggregate))),
                (root.key[1].attr.to_string(), s(sk)),
            ]
            .into();
            return Some((key, self.spec().mirror));
        }
        let key: Item = root
            .key
            .iter()
            .map(|k| {
                let vals: Vec<&str> = k.template.binders().map(|_| aggregate).collect();
                (k.attr.to_string(), s(k.template.build(&vals)))
            })
            .collect();
        Some((key, self.spec().mirror))
    }

    fn root_guard(&self, state: &FoldState) -> Option<Item> {
        if state.rejected {
            return None;
        }
        let h = self.spec();
        let mut guard = state.parts.get(h.root_part)?.clone();
        if h.root.fields.is_none() {
            // The part holds what the root had; the declared attributes it
            // lacked are guarded absent too: the root's validity is a
            // function of its declared attributes and its entity type, so
            // the guard holds on no item the rules reject (a root that
            // gained an optional attribute of the wrong type, say).
            let e = &self.0.entities[h.root.entity];
            let absent = e
                .attrs
                .iter()
                .map(|a| a.name)
                .chain(self.0.writer_type_checked.then_some(self.0.entity_type))
                .filter(|a| !h.root.excluded.contains(a))
                .collect::<Vec<_>>();
            for a in absent {
                guard
                    .entry(a.to_string())
                    .or_insert(AttributeValue::Null(true));
            }
        }
        Some(guard)
    }

    fn adopt(
        &self,
        aggregate: &str,
        partition: &[Item],
        at: chrono::DateTime<chrono::Utc>,
        token: &str,
    ) -> Adoption {
        let mut state = self.table_state(partition);
        if !state.parts.contains_key(self.spec().root_part) {
            return Adoption::Rootless(state);
        }
        state.seq += 1;
        let change = Change {
            event_id: format!("adopt:{aggregate}:{token}"),
            sequence_number: crate::change::SequenceNumber::parse("0")
                .expect("0 is a sequence number"),
            kind: ChangeKind::Insert,
            origin: crate::change::Origin::User,
            keys: Item::new(),
            old: None,
            new: None,
            at,
        };
        let imported = self.spec().imported.to_string();
        let (entry, _) = self.entry(aggregate, state.seq, imported, &change, &state);
        let id = entry.s("id").unwrap_or_default().to_string();
        Adoption::Entry { state, entry, id }
    }

    fn table_state(&self, partition: &[Item]) -> FoldState {
        let h = self.spec();
        let mut state = FoldState::default();
        for item in partition {
            let Ok((role, _, sk)) = self.classify(item) else {
                continue;
            };
            match role {
                Role::Entry => {
                    let seq = item.opt_i64(SEQUENCE).ok().flatten().unwrap_or(0).max(0) as u64;
                    state.seq = state.seq.max(seq);
                }
                Role::Root if self.validate(item).is_ok() => {
                    state
                        .parts
                        .insert(h.root_part.to_string(), self.root_kept(item));
                }
                Role::Member(i) if self.validate(item).is_ok() => {
                    state
                        .parts
                        .insert(sk.to_string(), self.member_part(&h.members[i].shape, item));
                }
                _ => {}
            }
        }
        state
    }

    fn entry_key(&self, aggregate: &str, seq: u64) -> Item {
        let h = self.spec();
        let e = &self.0.entities[h.entries];
        let [pkn, skn] = self.0.key_names();
        let number = format!("{seq:0w$}", w = h.digits);
        let v = self.values(aggregate);
        let sk_vals: Vec<String> = v[h.pk_arity.min(v.len())..]
            .iter()
            .take(h.sk_arity)
            .cloned()
            .chain(std::iter::once(number))
            .collect();
        [
            (pkn.to_string(), s(self.pk(aggregate))),
            (skn.to_string(), s(e.key[1].template.build(&sk_vals))),
        ]
        .into()
    }

    fn correct_entry(&self, entry: &Item, part: &str, value: Option<&Item>) -> Option<Item> {
        let Some(AttributeValue::M(snap)) = entry.get("snapshot") else {
            // Omitted (over 400 KB): nothing to correct.
            return None;
        };
        let h = self.spec();
        let [pkn, skn] = self.0.key_names();
        let agg_sk = match (entry.opt_s(pkn), entry.opt_s(skn)) {
            (Ok(Some(pk)), Ok(Some(sk))) => self
                .aggregate_of(pk, sk)
                .map(|a| self.values(&a).split_off(h.pk_arity))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut state = self.state_of_snapshot(snap, &agg_sk);
        match value {
            Some(v) => state.parts.insert(part.to_string(), v.clone()),
            None => state.parts.remove(part),
        };
        let want = AttributeValue::M(self.snapshot(&state));
        if entry.get("snapshot") == Some(&want) {
            return None;
        }
        let mut fixed = entry.clone();
        fixed.insert("snapshot".to_string(), want);
        (item_size(&fixed) <= MAX_ITEM_BYTES).then_some(fixed)
    }

    fn verify(&self, input: &crate::models::CheckInput<'_>) -> Vec<crate::models::Finding> {
        let (checked, found) = self.check_tallied(input.items, input.ledger);
        for (kind, n) in checked {
            input.checked(kind, n);
        }
        // Items valid to their rules whose history writes cannot exist:
        // bad input to the history (the rules' own refusals are the
        // derive's to list).
        for item in input.items {
            if let Err(e) = self.writable(item) {
                if self.0.parse(item).is_ok() {
                    input.bad_input(format!("{e} ({})", e.kind()));
                }
            }
        }
        found
    }

    fn restate(&self, entry: &Item, state: &FoldState) -> Restated {
        if !state.parts.contains_key(self.spec().root_part) {
            return Restated::RootGone;
        }
        let want = AttributeValue::M(self.snapshot(state));
        if entry.get("snapshot") == Some(&want) {
            return Restated::Same;
        }
        let mut fixed = entry.clone();
        fixed.remove("snapshotOmitted");
        fixed.insert("snapshot".to_string(), want);
        if item_size(&fixed) > MAX_ITEM_BYTES {
            if entry.contains_key("snapshotOmitted") {
                return Restated::Same;
            }
            fixed.remove("snapshot");
            fixed.insert(
                "snapshotOmitted".to_string(),
                s("snapshot omitted: the entry would exceed the 400 KB item limit"),
            );
        }
        Restated::Rewrite(fixed)
    }
}
