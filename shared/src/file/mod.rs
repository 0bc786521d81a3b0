//! A user's own model in a YAML file (SPEC §8): no Rust, no rebuild.
//!
//! - [`raw`] - the format as written, with positions (`serde-saphyr`).
//! - [`template`] - key templates that parse back, value templates.
//! - [`expr`] - the one wrapper of the `cel` crate: expressions compiled once.
//! - [`history`] - the `history:` block: a fold of an aggregate's changes.
//! - [`model`] - the file compiled; every problem with its line and column.
//! - [`sets`], [`once`] - join set jobs and at-most-once effects (SPEC §8).
//! - [`formats`] - `formats:`: named string shapes, compiled once.
//! - [`locate`] - `unique:`: counters found through an identity.
//! - [`rules`] - the [`crate::engine::rules::Rules`] a file produces.
//! - [`scenario`] - scenario files for `jobstream demo --model-file`.
//! - [`queries`] - access patterns (`queries:`); [`query_run`] runs them.
//!
//! [`load`] reads, checks and compiles a file once per process (the engine's
//! vocabulary speaks `&'static str`: the names are leaked once, never per
//! call) and [`model`] turns it into the same [`Model`] the registry holds, so
//! the engine, `verify`, `backfill`, the local runtime and the stack treat it
//! as a compiled model.

mod aspects;
pub mod compute;
pub mod compute_job;
mod each;
pub mod expr;
mod expr_cost;
pub mod formats;
pub mod history;
mod history_aggregate;
pub mod history_check;
pub mod history_compile;
mod history_images;
mod history_keys;
mod key_build;
mod keyed;
pub mod locate;
pub mod model;
pub mod number;
pub mod once;
pub mod once_run;
pub mod queries;
pub mod query_filter;
pub mod query_projection;
pub mod query_run;
pub mod raw;
mod record;
pub mod rules;
pub mod scenario;
pub mod sets;
mod sets_facts;
pub mod sets_run;
pub mod template;
pub mod typecheck;
#[cfg(test)]
mod typecheck_tests;
mod values;
pub mod verify_jobs;
pub mod yaml;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::Digest;

use crate::models::Model;
pub use model::{FileModel, Problem};

/// The model files shipped in the repository's `models/` (every `*.yaml`
/// there but the scenarios), as (path, text), embedded at build time
/// (`shared/build.rs`): `--model NAME` is `models/NAME.yaml`.
pub const SHIPPED: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/shipped_models.rs"));

/// The shipped models' demos (`models/NAME.scenario.yaml`), as (path, text).
pub const SHIPPED_SCENARIOS: &[(&str, &str)] =
    include!(concat!(env!("OUT_DIR"), "/shipped_scenarios.rs"));

/// The names of the shipped models (`models/NAME.yaml`), sorted.
pub fn shipped_names() -> impl Iterator<Item = &'static str> {
    SHIPPED.iter().filter_map(|(path, _)| {
        path.strip_prefix("models/")
            .and_then(|p| p.strip_suffix(".yaml"))
    })
}

/// The shipped model called `name`, compiled once per process; `None` when
/// no `models/NAME.yaml` is shipped.
pub fn shipped(name: &str) -> Option<Result<&'static Loaded, LoadError>> {
    static LOADED: Mutex<Option<HashMap<String, &'static Loaded>>> = Mutex::new(None);
    let path = format!("models/{name}.yaml");
    let (_, text) = SHIPPED.iter().find(|(p, _)| *p == path)?;
    let mut cache = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(l) = cache.get(name) {
        return Some(Ok(l));
    }
    let loaded = compile(text, name)
        .map_err(|problems| LoadError::Invalid {
            path: path.clone(),
            problems,
        })
        .map(|model| -> &'static Loaded {
            Box::leak(Box::new(Loaded {
                path: PathBuf::from(&path),
                sha256: hex(sha2::Sha256::digest(text.as_bytes()).as_slice()),
                model,
            }))
        });
    if let Ok(l) = loaded {
        cache.insert(name.to_string(), l);
    }
    Some(loaded)
}

/// The demo of the shipped model `name` (`models/NAME.scenario.yaml`), if
/// one is shipped: its path (for messages) and text.
pub fn shipped_scenario(name: &str) -> Option<(&'static str, &'static str)> {
    let path = format!("models/{name}.scenario.yaml");
    SHIPPED_SCENARIOS.iter().find(|(p, _)| *p == path).copied()
}

/// A model file that could not be used: every problem, each with its place.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", render(path, problems))]
    Invalid {
        path: String,
        problems: Vec<Problem>,
    },
}

fn render(path: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{path}:{}:{}: {}", p.line, p.col, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

impl LoadError {
    /// Every problem as `PATH:LINE:COL: message`.
    pub fn lines(&self) -> Vec<String> {
        match self {
            LoadError::Read { .. } => vec![self.to_string()],
            LoadError::Invalid { path, problems } => problems
                .iter()
                .map(|p| format!("{path}:{}:{}: {}", p.line, p.col, p.message))
                .collect(),
        }
    }
}

/// A loaded file: the model and what identifies the file.
#[derive(Debug)]
pub struct Loaded {
    pub path: PathBuf,
    /// SHA-256 of the file's bytes, hex (logged at a Lambda's cold start).
    pub sha256: String,
    pub model: FileModel,
}

/// YAML traps that parse without error but not as meant: an unquoted `#`
/// after a space starts a comment (`SK: #METADATA` is an empty value).
pub fn traps(source: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') {
            continue;
        }
        let mut quote: Option<char> = None;
        let mut prev = ' ';
        for (col, c) in line.chars().enumerate() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if (c == '"' || c == '\'') && (prev == ' ' || prev == '[' || prev == ',') => {
                    quote = Some(c)
                }
                None if c == '#' && prev.is_whitespace() => {
                    let after: String = line.chars().skip(col + 1).collect();
                    let before: String = line.chars().take(col).collect();
                    let word: String = line
                        .chars()
                        .skip(col)
                        .take_while(|c| !c.is_whitespace())
                        .collect();
                    // A comment after a value is fine (`x: 1 #todo`); a trap
                    // is a `#` that empties the value (`SK: #METADATA`) or
                    // cuts a template (`PK: ORG #${orgId}`).
                    let empties = before.trim_end().ends_with([':', '-', '[', ',', '{']);
                    let comment_like = after.starts_with(' ')
                        || after.is_empty()
                        || !(empties || word.contains("${"));
                    if !comment_like {
                        out.push(Problem::new(
                            i as u64 + 1,
                            col as u64 + 1,
                            format!(
                                "`{word}` is a comment, not part of the value{}: quote it (\"{}{word}\")",
                                if before.trim_end().ends_with(':') || before.trim_end().ends_with('-') {
                                    " (the value is empty)"
                                } else {
                                    ""
                                },
                                value_before(&before)
                            ),
                        ));
                    }
                    break;
                }
                None => {}
            }
            prev = c;
        }
    }
    out
}

/// YAML 1.1 words the parser reads as booleans when unquoted (`n: n` binds
/// `false`): a value spelt so is a trap; `true`/`false` are meant.
const YAML_BOOLS: &[&str] = &["y", "n", "yes", "no", "on", "off"];
const LONGEST_YAML_BOOL: usize = 3;

/// Unquoted values that YAML reads as booleans (`y`, `n`, `yes`, `no`,
/// `on`, `off`, any case): reported with the quoted spelling.
fn boolean_traps(source: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut quote: Option<char> = None;
        let mut col = 0;
        while col < chars.len() {
            let c = chars[col];
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => quote = Some(c),
                None if c == '#' && (col == 0 || chars[col - 1].is_whitespace()) => break,
                None if c == ':' || c == '-' || c == '[' || c == ',' => {
                    let after_sep = chars.get(col + 1).is_none_or(|n| n.is_whitespace());
                    if c == '[' || after_sep {
                        let start = (col + 1..chars.len())
                            .find(|k| !chars[*k].is_whitespace())
                            .unwrap_or(chars.len());
                        // A word longer than the longest of YAML_BOOLS is
                        // none of them: the scan stops there (a line of
                        // `[[[...` is read once, not once per `[`).
                        let limit = (start + LONGEST_YAML_BOOL + 1).min(chars.len());
                        let end = (start..limit)
                            .find(|k| matches!(chars[*k], ',' | ']' | '}' | ' ' | '#'))
                            .unwrap_or(limit);
                        let word = &chars[start..end];
                        let is_bool = YAML_BOOLS.iter().any(|b| {
                            b.len() == word.len()
                                && b.chars()
                                    .zip(word)
                                    .all(|(b, c)| c.to_ascii_lowercase() == b)
                        });
                        let is_key = || {
                            chars[end..]
                                .iter()
                                .find(|c| !c.is_whitespace())
                                .is_some_and(|c| *c == ':')
                        };
                        if is_bool && !is_key() {
                            let word: String = word.iter().collect();
                            out.push(Problem::new(
                                i as u64 + 1,
                                start as u64 + 1,
                                format!("`{word}` is read as a boolean by YAML, not as the name or text `{word}`: quote it (\"{word}\")"),
                            ));
                        }
                    }
                }
                None => {}
            }
            col += 1;
        }
    }
    out
}

/// The unquoted value text before a `#` (for the suggestion): what follows
/// the last `: `, `- `, `, `, `[` or `{`.
fn value_before(before: &str) -> String {
    let start = [": ", "- ", ", ", "[", "{"]
        .iter()
        .filter_map(|p| before.rfind(p).map(|i| i + p.len()))
        .max()
        .unwrap_or(0);
    let v = before[start..].trim();
    if v.is_empty() {
        String::new()
    } else {
        format!("{v} ")
    }
}

/// Parses and compiles a model file's text; `default_name` names it when the
/// file does not.
pub fn compile(source: &str, default_name: &str) -> Result<FileModel, Vec<Problem>> {
    let read = yaml::read(source);
    let mut problems = Vec::new();
    if source.len() <= yaml::MAX_FILE_BYTES {
        problems.extend(traps(source));
        problems.extend(boolean_traps(source));
    }
    let raw: raw::RawFile = match read {
        Ok(r) => r,
        Err(e) => {
            problems.push(Problem::new(e.line, e.col, yaml_hint(&e.message)));
            problems.sort();
            return Err(problems);
        }
    };
    match model::compile(raw, source, default_name) {
        Ok(m) if problems.is_empty() => Ok(m),
        Ok(_) => Err(problems),
        Err(more) => {
            problems.extend(more);
            problems.sort();
            problems.dedup();
            Err(problems)
        }
    }
}

/// A serde message without its position (reported in front of it), with a
/// suggestion for a misspelt field.
fn yaml_hint(msg: &str) -> String {
    let msg = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    // "unknown field `atributes`, expected one of owner, key, attributes, ..."
    let Some(rest) = msg.split("unknown field `").nth(1) else {
        return msg.to_string();
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return msg.to_string();
    };
    let fields: Vec<&str> = expected
        .trim_start_matches(", expected one of ")
        .trim_start_matches(", expected ")
        .split(", ")
        .map(|f| f.trim_matches('`'))
        .collect();
    match model::suggest(field, fields.iter().copied()) {
        Some(hint) => format!("{msg}{hint}"),
        None => msg.to_string(),
    }
}

fn read(path: &Path) -> Result<(String, String), LoadError> {
    // One byte past the limit is enough to refuse the file (yaml::read).
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| {
            std::io::Read::read_to_end(
                &mut std::io::Read::take(f, yaml::MAX_FILE_BYTES as u64 + 1),
                &mut bytes,
            )
        })
        .map_err(|source| LoadError::Read {
            path: path.display().to_string(),
            source,
        })?;
    if let Some(e) = yaml::too_large(bytes.len()) {
        return Err(LoadError::Invalid {
            path: path.display().to_string(),
            problems: vec![Problem::new(e.line, e.col, e.message)],
        });
    }
    let sha = hex(sha2::Sha256::digest(&bytes).as_slice());
    let text = String::from_utf8(bytes).map_err(|e| LoadError::Invalid {
        path: path.display().to_string(),
        problems: vec![Problem::new(1, 1, format!("not UTF-8: {e}"))],
    })?;
    Ok((text, sha))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string())
}

/// Checks a file without running anything: every problem, or, when there
/// is none, what the file does that its author may not expect of it (the
/// items a history's cascade deletes: [`FileModel::notes`]).
pub fn check(path: &Path) -> Result<Vec<String>, LoadError> {
    let (text, _) = read(path)?;
    compile(&text, &stem(path))
        .map(|model| model.notes())
        .map_err(|problems| LoadError::Invalid {
            path: path.display().to_string(),
            problems,
        })
}

/// Loads a file once per process (later calls with the same path return
/// the same model, whatever their number).
pub fn load(path: &Path) -> Result<&'static Loaded, LoadError> {
    static LOADED: Mutex<Option<HashMap<PathBuf, &'static Loaded>>> = Mutex::new(None);
    let canonical = std::fs::canonicalize(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let mut cache = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(l) = cache.get(&canonical) {
        return Ok(l);
    }
    let (text, sha256) = read(path)?;
    let model = compile(&text, &stem(path)).map_err(|problems| LoadError::Invalid {
        path: path.display().to_string(),
        problems,
    })?;
    let loaded: &'static Loaded = Box::leak(Box::new(Loaded {
        path: canonical.clone(),
        sha256,
        model,
    }));
    cache.insert(canonical, loaded);
    Ok(loaded)
}

impl Loaded {
    /// The model the registry would hold for it.
    pub fn model(&'static self) -> Model {
        let m = &self.model;
        Model {
            name: m.name,
            about: m.about,
            table: m.table.clone(),
            rules: Arc::new(rules::FileRules(m)),
            fold: m.history.as_ref().map(|h| crate::models::FoldSpec {
                processor: h.processor,
                rules: Arc::new(history::FileHistory(m)),
                filter: h.filter.clone(),
            }),
            consumers: m
                .sets
                .iter()
                .map(|s| crate::models::Consumer {
                    queue: s.queue.clone(),
                    job: crate::models::Job::Set(Arc::new(s.declaration(m))),
                })
                .chain(m.once.iter().map(|o| crate::models::Consumer {
                    queue: o.queue.clone(),
                    job: crate::models::Job::Once(Arc::new(once::FileOnce { model: m, spec: o })),
                }))
                .chain(m.entities.iter().enumerate().filter_map(|(i, e)| {
                    let c = e.compute.as_ref()?;
                    Some(crate::models::Consumer {
                        queue: c.queue.clone(),
                        job: crate::models::Job::Set(Arc::new(compute_job::ComputeJob {
                            m,
                            entity: i,
                        })),
                    })
                }))
                .collect(),
            // Every record: writers' items all need validating; processor
            // items are skipped by `ignores` without a read.
            derive_filter: vec![],
        }
    }
}

/// The model of a file, loaded once per process.
pub fn model(path: &Path) -> Result<Model, LoadError> {
    Ok(load(path)?.model())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unquoted_hash_is_a_trap() {
        let p =
            traps("key:\n  SK: #METADATA\n  PK: \"ORG#${orgId}\"\n  # a comment\nx: 1 # fine\ny: 1 #todo\nz: [a, #b]\n");
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!((p[0].line, p[0].col), (2, 7));
        assert_eq!(
            (p[1].line, p[1].col),
            (7, 8),
            "a `#` that empties a list item"
        );
        assert!(p[0].message.contains("\"#METADATA\""), "{}", p[0].message);
        let p = traps("  PK: ORG #${orgId}\n");
        assert_eq!(p.len(), 1);
        assert!(
            p[0].message.contains("\"ORG #${orgId}\""),
            "{}",
            p[0].message
        );
    }

    #[test]
    fn yaml_booleans_spelt_as_words_are_traps() {
        let p = boolean_traps(
            "values: { n: n, next: \"n + 1\" }\nlist: [y, \"n\"]\n- no\nok: true\nn: 1\nx: on # c\n",
        );
        let at: Vec<(u64, u64)> = p.iter().map(|p| (p.line, p.col)).collect();
        assert_eq!(at, [(1, 14), (2, 8), (3, 3), (6, 4)], "{p:#?}");
        assert!(
            p[0].message.contains("quote it (\"n\")"),
            "{}",
            p[0].message
        );
        for (path, shipped) in SHIPPED {
            assert!(boolean_traps(shipped).is_empty(), "{path}");
        }
    }

    /// The embedded lists are the folder as it is: every model file of
    /// `models/` and every scenario, each with its text; each shipped model
    /// compiles and loads by name, the scenarios parse.
    #[test]
    fn shipped_is_every_model_file_of_the_models_folder() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("models/")
            .filter_map(|e| {
                let p = e.ok()?.path();
                let name = p.file_name()?.to_str()?.to_string();
                name.ends_with(".yaml")
                    .then(|| (format!("models/{name}"), std::fs::read_to_string(&p).ok()))
                    .and_then(|(n, t)| Some((n, t?)))
            })
            .collect();
        on_disk.sort();
        let mut embedded: Vec<(String, String)> = SHIPPED
            .iter()
            .chain(SHIPPED_SCENARIOS)
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        embedded.sort();
        assert!(on_disk.len() >= 2, "{on_disk:?}");
        assert_eq!(embedded, on_disk);
        for name in shipped_names() {
            let loaded = shipped(name).expect("listed").expect("compiles");
            assert!(
                std::ptr::eq(loaded, shipped(name).unwrap().unwrap()),
                "once"
            );
        }
        assert!(shipped("no-such-model").is_none());
        for (path, text) in SHIPPED_SCENARIOS {
            scenario::Scenario::parse(text, path).expect("a shipped scenario parses");
        }
    }

    #[test]
    fn misspelt_fields_get_a_suggestion() {
        let h =
            yaml_hint("unknown field `atributes`, expected one of `owner`, `key`, `attributes`");
        assert!(h.ends_with("(did you mean `attributes`?)"), "{h}");
        let h = yaml_hint(
            "unknown field `atributes`, expected one of owner, key, attributes, check at line 15, column 5",
        );
        assert_eq!(
            h,
            "unknown field `atributes`, expected one of owner, key, attributes, check (did you mean `attributes`?)"
        );
    }
}

#[cfg(test)]
mod model_tests;

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod counter_tests;

#[cfg(test)]
mod once_tests;

#[cfg(test)]
mod once_refused_tests;

#[cfg(test)]
mod set_volatile_tests;

#[cfg(test)]
mod locate_tests;

#[cfg(test)]
mod normalize_tests;

#[cfg(test)]
mod set_also_tests;

#[cfg(test)]
mod set_from_tests;

#[cfg(test)]
mod record_tests;

#[cfg(test)]
mod compute_tests;

#[cfg(test)]
mod history_model_tests;

#[cfg(test)]
mod number_tests;

#[cfg(test)]
mod gsi_projection_tests;

#[cfg(test)]
mod collision_tests;

#[cfg(test)]
mod key_limits_tests;

#[cfg(test)]
mod enum_literal_tests;

#[cfg(test)]
mod expr_cost_tests;

#[cfg(test)]
mod each_tests;
#[cfg(test)]
mod key_fit_tests;

#[cfg(test)]
mod key_held_tests;

#[cfg(test)]
mod constants_tests;
