//! Playing a scenario against a harness: the writes, a drain, then every
//! expectation and check of each step.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

use super::{item, Scenario, ScenarioQuery, StepRef, TransactOp, VerifyCheck, Write};
use crate::file::FileModel;
use crate::item::{display_key, key_of};
use crate::models::{BoxError, Context as _, Harness};

/// Plays every step (writes in order, drain), then returns what differs
/// from `expect` and `absent`; its queries need the model file and are not
/// run here ([`play_model`] runs them).
pub async fn play(
    h: &mut dyn Harness,
    s: &Scenario,
    key_names: &[&str],
) -> Result<Vec<String>, BoxError> {
    let mut diffs = Vec::new();
    for step in s.all_steps() {
        diffs.extend(play_step(h, &step, key_names).await?);
    }
    Ok(diffs)
}

/// Plays every step and runs its queries through `m`'s declarations,
/// printing each query's items (`print`); returns every difference from
/// `expect`, `absent` and the queries (nothing else: under injected
/// faults a record can be counted bad input twice; [`play_checked`]
/// checks everything).
pub async fn play_model(
    h: &mut dyn Harness,
    s: &Scenario,
    m: &FileModel,
    print: bool,
) -> Result<Vec<String>, BoxError> {
    play_steps(h, s, m, print, false).await
}

/// [`play_model`] with every check of a step after it (a scenario is a
/// test): the table's item count when `items:` is given; the records
/// refused as bad input so far (`bad_input:`, default 0, carried on to the
/// steps that declare none); `verify` finds no drift and reports as bad
/// input what `verify:` says (default nothing, carried on); nothing in a
/// dead-letter queue or an on-failure destination; after the last step,
/// the processor writes (`processor_writes:`) and a fixpoint. Every
/// difference names its step. `jobstream demo` and the integration tests' scenario runner
/// play scenarios through it.
pub async fn play_checked(
    h: &mut dyn Harness,
    s: &Scenario,
    m: &FileModel,
    print: bool,
) -> Result<Vec<String>, BoxError> {
    play_steps(h, s, m, print, true).await
}

async fn play_steps(
    h: &mut dyn Harness,
    s: &Scenario,
    m: &FileModel,
    print: bool,
    checked: bool,
) -> Result<Vec<String>, BoxError> {
    let keys = m.key_names();
    let mut diffs = Vec::new();
    let mut carried = Carried::default();
    for (i, step) in s.all_steps().into_iter().enumerate() {
        if print {
            if let Some(say) = step.say {
                crate::out::line(format_args!("\n== step {i}: {say}"));
            }
        }
        let mut found = play_step(h, &step, &keys).await?;
        for q in step.queries {
            found.extend(run_query(h, m, q, print).await?);
        }
        if !checked {
            diffs.extend(found);
            continue;
        }
        let at = step.label(i);
        diffs.extend(found.into_iter().map(|d| format!("after {at}: {d}")));
        diffs.extend(check_step(h, &step, i, &mut carried).await?);
    }
    if checked {
        diffs.extend(check_end(h, s, print).await?);
    }
    Ok(diffs)
}

/// After the last step: the processors' item writes (printed with
/// `print`) are `processor_writes:` when given, and a second drain finds
/// the fixpoint (no record, no write).
async fn check_end(
    h: &mut dyn Harness,
    s: &Scenario,
    print: bool,
) -> Result<Vec<String>, BoxError> {
    let mut diffs = Vec::new();
    let writes = h.processor_writes();
    if print {
        crate::out::line(format_args!("processor writes: {writes}"));
    }
    let more = h.drain().await?;
    let again = h.processor_writes() - writes;
    if more != 0 || again != 0 {
        diffs.push(format!(
            "no fixpoint: {more} more record(s), {again} more write(s) after draining"
        ));
    }
    if let Some(want) = s.processor_writes.filter(|w| *w != writes) {
        diffs.push(format!("processor writes: {writes}, expected {want}"));
    }
    Ok(diffs)
}

/// What a step expects when it declares nothing: the last declaration.
#[derive(Default)]
struct Carried {
    bad_input: u64,
    verify: VerifyCheck,
}

/// The checks after step `i` (see [`play_checked`]): each difference names
/// the step.
async fn check_step(
    h: &mut dyn Harness,
    step: &StepRef<'_>,
    i: usize,
    carried: &mut Carried,
) -> Result<Vec<String>, BoxError> {
    let at = step.label(i);
    let mut diffs = Vec::new();
    if let Some(want) = step.items {
        let got = count_items(h).await?;
        if got != want {
            diffs.push(format!(
                "after {at}: the table holds {got} item(s), expected {want}"
            ));
        }
    }
    if let Some(n) = step.bad_input {
        carried.bad_input = n;
    }
    let got = h.bad_input();
    if got != carried.bad_input {
        diffs.push(format!(
            "after {at}: {got} record(s) refused as bad input so far, expected {}",
            carried.bad_input
        ));
    }
    let drift: &[String] = step.verify.as_ref().map_or(&[], |v| &v.drift);
    if let Some(v) = step.verify {
        carried.verify = VerifyCheck {
            drift: vec![],
            ..v.clone()
        };
    }
    let report = h.verify().await?;
    if drift.is_empty() {
        diffs.extend(
            report
                .problems
                .iter()
                .map(|p| format!("after {at}: verify: drift: {p}")),
        );
    } else {
        if report.problems.len() != drift.len() {
            diffs.push(format!(
                "after {at}: verify finds {} drift finding(s), expected {}: {:?}",
                report.problems.len(),
                drift.len(),
                report.problems
            ));
        }
        for words in drift {
            if !report.problems.iter().any(|p| p.contains(words.as_str())) {
                diffs.push(format!(
                    "after {at}: no drift verify finds says `{words}`: {:?}",
                    report.problems
                ));
            }
        }
    }
    let want = &carried.verify;
    if report.bad_input.len() != want.bad_input {
        diffs.push(format!(
            "after {at}: verify names {} item(s) as bad input, expected {}: {:?}",
            report.bad_input.len(),
            want.bad_input,
            report.bad_input
        ));
    }
    for words in &want.says {
        if !report.bad_input.iter().any(|b| b.contains(words.as_str())) {
            diffs.push(format!(
                "after {at}: no bad input verify reports says `{words}`: {:?}",
                report.bad_input
            ));
        }
    }
    let dead = h.dead_letters().await?;
    diffs.extend(
        dead.iter()
            .map(|d| format!("after {at}: dead letters: {d}")),
    );
    Ok(diffs)
}

/// The item at `key`, read consistently.
async fn read(
    h: &dyn Harness,
    table: &str,
    key: &crate::item::Item,
) -> Result<Option<crate::item::Item>, BoxError> {
    Ok(h.dynamodb()
        .get_item()
        .table_name(table)
        .set_key(Some(key.clone()))
        .consistent_read(true)
        .send()
        .await
        .context("scenario read")?
        .item)
}

/// Every item of the table, counted (a consistent scan, page by page).
async fn count_items(h: &dyn Harness) -> Result<usize, BoxError> {
    let mut n = 0usize;
    let mut start = None;
    loop {
        let out = h
            .dynamodb()
            .scan()
            .table_name(h.table())
            .select(aws_sdk_dynamodb::types::Select::Count)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .context("scenario count")?;
        n += usize::try_from(out.count()).unwrap_or_default();
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(n);
        }
    }
}

/// Items a demo prints of one query (the rest are counted).
const SHOWN: usize = 12;

/// Runs one scenario query; its differences from `expect`.
pub async fn run_query(
    h: &mut dyn Harness,
    m: &FileModel,
    q: &ScenarioQuery,
    print: bool,
) -> Result<Vec<String>, BoxError> {
    use crate::file::query_run;
    let title = q.title();
    let bound = match query_run::bind(m, &q.query, &q.args()) {
        Ok(b) => b,
        Err(e) => return Ok(vec![format!("query {title}: {e}")]),
    };
    let table = h.table().to_string();
    let out = query_run::run(h.dynamodb(), &table, &bound, None).await?;
    if print {
        let about = query_run::find(m, &q.query)
            .ok()
            .and_then(|d| d.about.clone())
            .map(|a| format!("  ({a})"))
            .unwrap_or_default();
        crate::out::line(format_args!("\nquery {title}{about}"));
        if let Ok(d) = query_run::find(m, &q.query) {
            let shown = out.items.len().min(SHOWN);
            crate::out::line(format_args!(
                "{}",
                query_run::render(m, d, &out.items[..shown])
            ));
            if out.items.len() > shown {
                crate::out::line(format_args!("... and {} more", out.items.len() - shown));
            }
        }
        if out.items.is_empty() {
            crate::out::line(format_args!("(no items)"));
        }
    }
    let mut diffs = Vec::new();
    if let Some(n) = q.count {
        if n != out.items.len() {
            diffs.push(format!(
                "query {title}: {} item(s), expected {n}",
                out.items.len()
            ));
        }
    } else if print {
        crate::out::line(format_args!("({} item(s))", out.items.len()));
    }
    let Some(want) = &q.expect else {
        return Ok(diffs);
    };
    if let Ok(d) = query_run::find(m, &q.query) {
        let expected = want.iter().flat_map(|w| w.keys().map(String::as_str));
        for why in query_run::unprojected(m, d, expected) {
            diffs.push(format!("query {title}: {why}"));
        }
    }
    // With `count`, `expect` lists the first items; without, all of them.
    if q.count.is_none() && want.len() != out.items.len() {
        diffs.push(format!(
            "query {title}: {} item(s), expected {}",
            out.items.len(),
            want.len()
        ));
    }
    for (n, (w, got)) in want.iter().map(item).zip(&out.items).enumerate() {
        for (a, v) in &w {
            let absent = matches!(v, AttributeValue::Null(_)) && !got.contains_key(a);
            if !absent && got.get(a) != Some(v) {
                diffs.push(format!(
                    "query {title}: item {}: `{a}` is {}, expected {}",
                    n + 1,
                    query_run::cell(got.get(a)),
                    query_run::cell(Some(v))
                ));
            }
        }
    }
    Ok(diffs)
}

/// One step: the writes in order, a drain, then the expected and absent
/// items read back.
async fn play_step(
    h: &mut dyn Harness,
    s: &StepRef<'_>,
    key_names: &[&str],
) -> Result<Vec<String>, BoxError> {
    let table = h.table().to_string();
    let mut written = 0usize;
    for w in s.writes {
        let expanded;
        let writes: &[Write] = match w {
            Write::Repeat(r) => {
                expanded = r.expand().map_err(crate::models::Failed)?;
                &expanded
            }
            one => std::slice::from_ref(one),
        };
        for w in writes {
            written += 1;
            match w {
                Write::Put(m) => {
                    let it = item(m);
                    let what = format!(
                        "scenario write {written} (put {})",
                        display_key(&key_of(&it, key_names))
                    );
                    h.dynamodb()
                        .put_item()
                        .table_name(&table)
                        .set_item(Some(it))
                        .send()
                        .await
                        .context(&what)?;
                }
                Write::Delete(m) => {
                    let key = key_of(&item(m), key_names);
                    let what = format!("scenario write {written} (delete {})", display_key(&key));
                    h.dynamodb()
                        .delete_item()
                        .table_name(&table)
                        .set_key(Some(key))
                        .send()
                        .await
                        .context(&what)?;
                }
                Write::Transact(ops) => {
                    let what = format!("scenario write {written} (transact)");
                    h.dynamodb()
                        .transact_write_items()
                        .set_transact_items(Some(transact_items(ops, &table, key_names)))
                        .send()
                        .await
                        .context(&what)?;
                }
                // `expand` gives puts and deletes only.
                Write::Repeat(_) => {}
            }
        }
    }
    h.drain().await?;
    let mut diffs = Vec::new();
    for want in s.expect.iter().map(item) {
        let key = key_of(&want, key_names);
        match read(h, &table, &key).await? {
            None => diffs.push(format!("missing: {}", display_key(&key))),
            Some(got) => {
                for (a, v) in &want {
                    // `null` expects the attribute absent (a sparse index).
                    let absent = matches!(v, AttributeValue::Null(_)) && !got.contains_key(a);
                    if !absent && got.get(a) != Some(v) {
                        diffs.push(format!(
                            "{}: `{a}` is {}, expected {}",
                            display_key(&key),
                            crate::file::query_run::shown(got.get(a)),
                            crate::file::query_run::shown(Some(v))
                        ));
                    }
                }
            }
        }
    }
    for gone in s.absent.iter().map(item) {
        let key = key_of(&gone, key_names);
        if read(h, &table, &key).await?.is_some() {
            diffs.push(format!("present, expected absent: {}", display_key(&key)));
        }
    }
    Ok(diffs)
}

/// A `transact` write's actions on `table`.
pub(super) fn transact_items(
    ops: &[TransactOp],
    table: &str,
    key_names: &[&str],
) -> Vec<TransactWriteItem> {
    ops.iter()
        .map(|op| match op {
            TransactOp::Put(m) => crate::tx::put(table, item(m)),
            TransactOp::Delete(m) => crate::tx::delete(table, key_of(&item(m), key_names)),
        })
        .collect()
}
