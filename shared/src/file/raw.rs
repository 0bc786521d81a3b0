//! The YAML format of a model file as written, with the position of every
//! value (`serde-saphyr`'s [`Spanned`]). [`super::compile`] turns it into a
//! model; nothing here interprets names or expressions.
//!
//! Top-level blocks: `jobstream` (the version, 1), `name`, `about`, `table`,
//! `entities`, `sets` (join set jobs, [`super::sets`]), `once` (at-most-once
//! effects, [`super::once`]), `history` ([`super::history`]), `formats`
//! ([`super::formats`]), `queries` (access patterns, [`super::queries`]).

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
pub use serde_saphyr::Spanned;

/// A mapping whose order is kept (entities, attributes, templates): the file's
/// order is the order of projections and of problems.
#[derive(Debug)]
pub struct Ordered<V>(pub Vec<(String, V)>);

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Vis<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, V>()? {
                    if out.iter().any(|(seen, _): &(String, V)| *seen == k) {
                        return Err(de::Error::custom(format!("`{k}` appears twice")));
                    }
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(Vis(std::marker::PhantomData))
    }
}

/// A scalar written as a string, a number or a boolean, kept as its text
/// (CEL reads `1`, `true` and `'a'` alike).
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis;
        impl Visitor<'_> for Vis {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, a number or a boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
                Err(E::custom(
                    "empty value (an unquoted `#` starts a comment: quote the value)",
                ))
            }
        }
        d.deserialize_any(Vis)
    }
}

/// An attribute's type: a name (`string`, `int`, `bool`, `ulid`, `iso-utc`,
/// `set`; `?` at the end = optional) or a list of allowed values (an enum of
/// strings, of integers or of booleans, typed as written).
#[derive(Debug, Clone, PartialEq)]
pub enum AttrSpec {
    Named(String),
    Enum(Vec<EnumValue>),
}

/// One allowed value of an enum, as YAML typed it (`open`, `"1"`: strings;
/// `1`: an integer; `true`: a boolean).
#[derive(Debug, Clone, PartialEq)]
pub enum EnumValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl<'de> Deserialize<'de> for EnumValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis;
        impl Visitor<'_> for Vis {
            type Value = EnumValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, an integer or a boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EnumValue, E> {
                Ok(EnumValue::Str(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<EnumValue, E> {
                Ok(EnumValue::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<EnumValue, E> {
                i64::try_from(v)
                    .map(EnumValue::Int)
                    .map_err(|_| E::custom(format!("{v} is out of the integer range")))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<EnumValue, E> {
                Ok(EnumValue::Bool(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<EnumValue, E> {
                Err(E::custom(
                    "empty value (an unquoted `#` starts a comment: quote the value)",
                ))
            }
        }
        d.deserialize_any(Vis)
    }
}

impl<'de> Deserialize<'de> for AttrSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis;
        impl<'de> Visitor<'de> for Vis {
            type Value = AttrSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a type name or a list of allowed values")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AttrSpec, E> {
                Ok(AttrSpec::Named(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<AttrSpec, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(AttrSpec::Enum)
            }
            fn visit_unit<E: de::Error>(self) -> Result<AttrSpec, E> {
                Err(E::custom(
                    "empty type (an unquoted `#` starts a comment: quote the value)",
                ))
            }
        }
        d.deserialize_any(Vis)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    pub jobstream: Spanned<u32>,
    pub name: Option<Spanned<String>>,
    pub about: Option<String>,
    pub table: Spanned<RawTable>,
    pub entities: Spanned<Ordered<Spanned<RawEntity>>>,
    /// Join set jobs (SPEC §8), see [`super::sets`].
    pub sets: Option<Spanned<Ordered<Spanned<super::sets::RawSet>>>>,
    /// A history of an aggregate (SPEC §3), see [`super::history`].
    pub history: Option<Spanned<super::history_compile::RawHistory>>,
    /// At-most-once effects (SPEC §8), see [`super::once`].
    pub once: Option<Spanned<Ordered<Spanned<super::once::RawOnce>>>>,
    /// Named formats (SPEC §8), see [`super::formats`].
    pub formats: Option<Spanned<Ordered<Spanned<super::formats::RawFormat>>>>,
    /// Access patterns (SPEC §8), see [`super::queries`].
    pub queries: Option<Spanned<Ordered<Spanned<super::queries::RawQuery>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTable {
    pub name: Spanned<String>,
    pub pk: Spanned<String>,
    pub sk: Spanned<String>,
    #[serde(default)]
    pub gsis: Vec<Spanned<RawGsi>>,
    pub ttl: Option<Spanned<String>>,
    /// The entity-type attribute stamped on processor items (default `type`).
    pub entity_type: Option<Spanned<String>>,
    /// `checked` (default): a writer item must carry its entity's name in the
    /// entity-type attribute; `free`: the writer's own business.
    pub writer_type: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGsi {
    pub name: Spanned<String>,
    pub pk: Spanned<String>,
    /// Absent: an index keyed by its partition key alone.
    pub sk: Option<Spanned<String>>,
    /// What the index projects: `all` (default), `keys`, or a list of
    /// attributes (besides the keys).
    pub project: Option<Spanned<RawGsiProject>>,
}

/// A GSI's `project:` as written: a word (`all`, `keys`) or a list of
/// attribute names.
#[derive(Debug, Clone, PartialEq)]
pub enum RawGsiProject {
    Named(String),
    Attrs(Vec<String>),
}

impl<'de> Deserialize<'de> for RawGsiProject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis;
        impl<'de> Visitor<'de> for Vis {
            type Value = RawGsiProject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`all`, `keys` or a list of attribute names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawGsiProject, E> {
                Ok(RawGsiProject::Named(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawGsiProject, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(RawGsiProject::Attrs)
            }
        }
        d.deserialize_any(Vis)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEntity {
    /// `writer` (default), `processor`, or `other` (another writer's key
    /// space, read and left alone).
    pub owner: Option<Spanned<String>>,
    /// A processor entity several source items may imply at once (e.g. a
    /// lookup item while its source is re-keyed): it lives while any of
    /// them implies it (an owner record in the ledger).
    #[serde(default)]
    pub shared: bool,
    /// Key attribute -> template (`"ORG#${orgId}"`, `"#METADATA"`).
    pub key: Spanned<Ordered<Spanned<Scalar>>>,
    #[serde(default)]
    pub attributes: Ordered<Spanned<AttrSpec>>,
    #[serde(default)]
    pub check: Vec<Spanned<RawCheck>>,
    pub project: Option<Spanned<RawProject>>,
    #[serde(default)]
    pub derive: Vec<Spanned<RawDerive>>,
    #[serde(default)]
    pub count: Vec<Spanned<RawCount>>,
    pub counter: Option<Spanned<RawCounter>>,
    /// Attributes whose values identify one item of this entity across the
    /// table (`unique: [invoiceId]`): a `count:` whose `with` binds them
    /// counts into the item found through them (SPEC §8, located counters),
    /// whatever the rest of its key.
    pub unique: Option<Spanned<Vec<Spanned<String>>>>,
    /// Set jobs this entity's changes start (SPEC §8): reserved.
    pub starts: Option<Spanned<IgnoredAny>>,
    /// Processor-owned attributes computed over a partition
    /// ([`super::compute`]).
    pub compute: Option<Spanned<super::compute::RawCompute>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    /// A CEL expression that must be true.
    pub expr: Spanned<String>,
    /// What an item that fails it is told (default: the expression).
    pub message: Option<String>,
    /// The attribute the message is about (for the error's field).
    pub attribute: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProject {
    /// While false, every projected attribute is absent (a sparse index).
    pub when: Option<Spanned<Scalar>>,
    pub attributes: Spanned<Ordered<Spanned<Scalar>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDerive {
    pub entity: Spanned<String>,
    /// The derived entity's key names and attributes -> CEL expressions.
    #[serde(default)]
    pub with: Ordered<Spanned<Scalar>>,
    pub when: Option<Spanned<Scalar>>,
    /// `{ tag: tags }`: the derive applies once per distinct element of
    /// the `set` or `list` attribute `tags`, `tag` naming the element.
    pub each: Option<Spanned<Ordered<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCount {
    /// The counter entity.
    pub counter: Spanned<String>,
    #[serde(default)]
    pub with: Ordered<Spanned<Scalar>>,
    /// Counter attribute -> amount (a CEL expression, an int).
    pub add: Spanned<Ordered<Spanned<Scalar>>>,
    pub when: Option<Spanned<Scalar>>,
    /// `{ tag: tags }`: the count applies once per distinct element of
    /// the `set` or `list` attribute `tags`, `tag` naming the element.
    pub each: Option<Spanned<Ordered<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCounter {
    pub attributes: Spanned<Vec<Spanned<String>>>,
    /// `processor`: created on the first count; `writer` (default): never
    /// created, sums wait until the writer's item exists.
    pub created_by: Option<Spanned<String>>,
    #[serde(default)]
    pub remove_at_zero: bool,
}
