//! Attribute values read, validated and written by their declared type
//! (`int`, `number`, `bool`, enums, ULIDs, formats, maps and lists as
//! expressions read them): what [`super::rules`] parses an item with.

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::Val;
use super::model::{Attr, Entity, Ty};
use super::number::Number;
use crate::item::{AttrError, Item};

/// An attribute's value that its type refuses (the value is not logged).
pub(super) fn invalid(name: &str, reason: impl Into<String>) -> AttrError {
    AttrError::Invalid {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// An `int` attribute's value: a 64-bit integer. A longer integer (DynamoDB
/// numbers hold 38 digits) is said to be out of range, not "not an integer".
fn int(name: &str, v: &str) -> Result<i64, AttrError> {
    v.parse::<i64>().map_err(|_| {
        let digits = v.strip_prefix('-').unwrap_or(v);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            invalid(name, "an integer out of range (an `int` is 64-bit: -9223372036854775808..=9223372036854775807)")
        } else {
            invalid(name, "not an integer")
        }
    })
}

impl Ty {
    fn dynamo(&self) -> &'static str {
        match self {
            Ty::Int | Ty::Number | Ty::IntEnum(_) => "N",
            Ty::Bool | Ty::BoolEnum(_) => "BOOL",
            Ty::Set => "SS",
            Ty::Map => "M",
            Ty::List => "L",
            _ => "S",
        }
    }
}

/// A `number`'s value (`N`) as expressions read it: an int when it is one
/// that fits 64 bits, else the exact number.
fn number(name: &str, v: &str) -> Result<Val, AttrError> {
    if let Ok(i) = v.parse::<i64>() {
        return Ok(Val::Int(i));
    }
    Number::parse(v)
        .map(Val::number)
        .map_err(|why| invalid(name, why))
}

/// A number inside a map or a list: an int, else the exact number (what an
/// expression may do with it is a `number`'s: compare, copy, render).
pub(super) fn nested_number(n: &str) -> Result<Val, String> {
    if let Ok(i) = n.parse::<i64>() {
        return Ok(Val::Int(i));
    }
    Number::parse(n)
        .map(Val::number)
        .map_err(|why| format!("holds {why}"))
}

/// A map or list attribute as expressions read it (numbers as ints or
/// exact numbers); binary values are refused.
fn from_dynamo(v: &AttributeValue) -> Result<Val, String> {
    Ok(match v {
        AttributeValue::S(s) => Val::Str(s.clone()),
        AttributeValue::N(n) => nested_number(n)?,
        AttributeValue::Bool(b) => Val::Bool(*b),
        AttributeValue::Null(_) => Val::Null,
        AttributeValue::Ss(v) => set(v),
        AttributeValue::M(m) => {
            let mut out = Vec::with_capacity(m.len());
            for (k, v) in m {
                out.push((k.clone(), from_dynamo(v)?));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Val::Map(out)
        }
        AttributeValue::L(l) => Val::List(l.iter().map(from_dynamo).collect::<Result<_, _>>()?),
        other => {
            return Err(format!(
                "holds a {} value, which expressions do not read",
                crate::item::type_name(other)
            ))
        }
    })
}

/// A string set as expressions read it: sorted, each string once.
fn set(v: &[String]) -> Val {
    let mut v = v.to_vec();
    v.sort();
    v.dedup();
    Val::Set(v)
}

/// A processor-owned number as stored: an int, else 0.
/// A counter's sum as stored: exact past 64 bits (as DynamoDB adds the
/// contributions, to 38 digits: an int when it fits, else the exact
/// integer), 0 when unset or not a number (a writer's stray value, which
/// the engine brings back to the sum).
pub(super) fn stored_sum(item: &Item, name: &str) -> Val {
    match item.get(name) {
        Some(AttributeValue::N(n)) => match n.parse::<i64>() {
            Ok(i) => Val::Int(i),
            Err(_) => Number::parse(n)
                .ok()
                .filter(Number::is_integer)
                .map_or(Val::Int(0), Val::number),
        },
        _ => Val::Int(0),
    }
}

pub(super) fn stored_int(item: &Item, name: &str) -> i64 {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse::<i64>().unwrap_or(0),
        _ => 0,
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.f]Z`, a real time: the one form of RFC 3339 whose
/// strings sort as their times do (chrono alone also takes a space or a
/// `t` between date and time, and a `z`).
fn is_iso_utc(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && match &b[19..] {
            [b'Z'] => true,
            [b'.', fraction @ .., b'Z'] => {
                !fraction.is_empty() && fraction.iter().all(u8::is_ascii_digit)
            }
            _ => false,
        };
    shape && chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// A number in a string (a key's part) written as DynamoDB returns numbers
/// and renders them into keys (`12.1`, not `12.10` or `1.21e1`): one text
/// per value, so a key and its attribute agree by text as by value.
fn canonical(name: &str, v: &str) -> Result<(), AttrError> {
    let n = Number::parse(v).map_err(|why| invalid(name, why))?;
    if n.to_string() != v {
        return Err(invalid(
            name,
            "a number not written as DynamoDB returns it (no exponent, no leading or trailing zeros)",
        ));
    }
    Ok(())
}

/// A value outside its enum (the value itself is not logged).
fn not_one_of<T: ToString>(name: &str, allowed: &[T]) -> AttrError {
    let allowed: Vec<String> = allowed.iter().map(T::to_string).collect();
    invalid(name, format!("not one of {}", allowed.join("|")))
}

/// Validates a string value against a string-shaped type.
pub(super) fn check_str(name: &str, v: &str, ty: &Ty) -> Result<(), AttrError> {
    match ty {
        Ty::Ulid if ulid::Ulid::from_string(v).is_err() => {
            Err(invalid(name, "not a ULID (26 Crockford base32 characters)"))
        }
        Ty::IsoUtc if !is_iso_utc(v) => Err(invalid(
            name,
            "not an ISO-8601 UTC time (YYYY-MM-DDTHH:MM:SS[.f]Z)",
        )),
        Ty::Format(f) => f.reject(v).map_or(Ok(()), |why| Err(invalid(name, why))),
        Ty::Int => int(name, v).map(|_| ()),
        Ty::Number => canonical(name, v),
        Ty::Enum(allowed) if !allowed.iter().any(|a| a == v) => Err(not_one_of(name, allowed)),
        Ty::IntEnum(allowed) if !v.parse::<i64>().is_ok_and(|i| allowed.contains(&i)) => {
            Err(not_one_of(name, allowed))
        }
        Ty::BoolEnum(allowed) if !v.parse::<bool>().is_ok_and(|b| allowed.contains(&b)) => {
            Err(not_one_of(name, allowed))
        }
        _ => Ok(()),
    }
}

/// A key name's value (a string in the key) as expressions read it: typed
/// by the entity's attribute of that name, else by the binder's format.
pub(super) fn key_val(
    entity: &Entity,
    name: &str,
    format: Option<&str>,
    value: &str,
    formats: &[&'static super::formats::Format],
) -> Result<Val, AttrError> {
    let ty = entity
        .attr(name)
        .map(|a| a.ty.clone())
        .or_else(|| format.and_then(|f| super::formats::named(f, formats)));
    typed_str(name, value, ty.as_ref())
}

/// A string (a key's part) as a value of type `ty`.
pub(super) fn typed_str(name: &str, v: &str, ty: Option<&Ty>) -> Result<Val, AttrError> {
    match ty {
        Some(t @ (Ty::Int | Ty::IntEnum(_))) => {
            check_str(name, v, t)?;
            int(name, v).map(Val::Int)
        }
        Some(Ty::Number) => {
            canonical(name, v)?;
            number(name, v)
        }
        Some(t @ (Ty::Bool | Ty::BoolEnum(_))) => {
            check_str(name, v, t)?;
            match v {
                "true" => Ok(Val::Bool(true)),
                "false" => Ok(Val::Bool(false)),
                _ => Err(invalid(name, "not a boolean (`true` or `false`)")),
            }
        }
        Some(t) => {
            check_str(name, v, t)?;
            Ok(Val::Str(v.to_string()))
        }
        None => Ok(Val::Str(v.to_string())),
    }
}

/// The key's part an optional attribute takes when the item does not hold
/// it (`position_key?: string` bound by `$entry#${position_key}`, a part
/// ElectroDB keeps only in the key): the first part `bound` (each key
/// binder's name and value) gives it. `None` when the item holds it, it is
/// required (its absence is bad input), the key does not bind it, its
/// part is empty (an absent value renders so) or its type is no key
/// part's (a set, a map, a list).
pub(super) fn key_held<'k>(
    a: &Attr,
    item: &Item,
    mut bound: impl Iterator<Item = (&'k str, &'k str)>,
) -> Option<&'k str> {
    if !a.optional
        || !matches!(item.get(a.name), None | Some(AttributeValue::Null(_)))
        || matches!(a.ty, Ty::Set | Ty::Map | Ty::List | Ty::Unknown)
    {
        return None;
    }
    bound
        .find(|(n, _)| *n == a.name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// One attribute as the record reads it: the item's, validated by its
/// type ([`read_attr`]), or, optional and absent, the key's part that
/// `bound` (each key binder's name and value) gives it ([`key_held`]).
pub(super) fn read_held<'k>(
    item: &Item,
    a: &Attr,
    bound: impl Iterator<Item = (&'k str, &'k str)>,
) -> Result<Val, AttrError> {
    match key_held(a, item, bound) {
        Some(part) => typed_str(a.name, part, Some(&a.ty)),
        None => read_attr(item, a),
    }
}

/// Whether `e` has an optional attribute `item` lacks that its key binds
/// (what [`fill_from_key`] would set): cheap, before any key is matched.
pub(super) fn lacks_key_held(e: &Entity, item: &Item) -> bool {
    e.key_binders().any(|(n, _)| {
        e.attr(n)
            .is_some_and(|a| key_held(a, item, std::iter::once((n, "x"))).is_some())
    })
}

/// Sets on `item` each optional attribute of `e` it lacks that `bound`
/// (key binders' names and values) gives ([`key_held`]), stored as its
/// type says, when `keep` selects its name. (A part its type refuses is
/// left out: the item is bad input to the rules already.)
pub(super) fn fill_from_key<'k>(
    e: &Entity,
    bound: &[(&'k str, &'k str)],
    item: &mut Item,
    keep: impl Fn(&str) -> bool,
) {
    for a in e.attrs.iter().filter(|a| keep(a.name)) {
        let Some(part) = key_held(a, item, bound.iter().copied()) else {
            continue;
        };
        let v = typed_str(a.name, part, Some(&a.ty))
            .ok()
            .and_then(|v| to_attr(a.name, v, Some(&a.ty)).ok().flatten());
        if let Some(v) = v {
            item.insert(a.name.to_string(), v);
        }
    }
}

/// One attribute read and validated by its declared type.
pub(super) fn read_attr(item: &Item, a: &Attr) -> Result<Val, AttrError> {
    let v = match item.get(a.name) {
        None | Some(AttributeValue::Null(_)) if a.optional => return Ok(Val::Null),
        None | Some(AttributeValue::Null(_)) if a.ty == Ty::Set => return Ok(Val::Set(vec![])),
        None | Some(AttributeValue::Null(_)) => return Err(AttrError::Missing(a.name.to_string())),
        Some(v) => v,
    };
    let wrong = |found: &AttributeValue| AttrError::WrongType {
        name: a.name.to_string(),
        expected: a.ty.dynamo(),
        found: crate::item::type_name(found),
    };
    match (&a.ty, v) {
        (Ty::Int, AttributeValue::N(n)) => int(a.name, n).map(Val::Int),
        (Ty::Number, AttributeValue::N(n)) => number(a.name, n),
        (Ty::Bool, AttributeValue::Bool(b)) => Ok(Val::Bool(*b)),
        (Ty::IntEnum(allowed), AttributeValue::N(n)) => match n.parse::<i64>() {
            Ok(i) if allowed.contains(&i) => Ok(Val::Int(i)),
            _ => Err(not_one_of(a.name, allowed)),
        },
        (Ty::BoolEnum(allowed), AttributeValue::Bool(b)) if allowed.contains(b) => {
            Ok(Val::Bool(*b))
        }
        (Ty::BoolEnum(allowed), AttributeValue::Bool(_)) => Err(not_one_of(a.name, allowed)),
        (Ty::Map, AttributeValue::M(_)) | (Ty::List, AttributeValue::L(_)) => {
            from_dynamo(v).map_err(|e| invalid(a.name, e))
        }
        (Ty::Set, AttributeValue::Ss(v)) => Ok(set(v)),
        (Ty::Str | Ty::Ulid | Ty::IsoUtc | Ty::Enum(_) | Ty::Format(_), AttributeValue::S(s)) => {
            check_str(a.name, s, &a.ty)?;
            Ok(Val::Str(s.clone()))
        }
        (_, other) => Err(wrong(other)),
    }
}

/// A value as the attribute type of `ty` says it is stored.
pub(super) fn to_attr(
    name: &str,
    v: Val,
    ty: Option<&Ty>,
) -> Result<Option<AttributeValue>, String> {
    Ok(Some(match (ty, v) {
        (_, Val::Null) => return Ok(None),
        (Some(Ty::Int | Ty::Number) | None, Val::Int(i)) => AttributeValue::N(i.to_string()),
        (Some(Ty::Number) | None, Val::Num(n)) => AttributeValue::N(n.to_string()),
        (Some(Ty::Bool) | None, Val::Bool(b)) => AttributeValue::Bool(b),
        (Some(Ty::IntEnum(allowed)), Val::Int(i)) if allowed.contains(&i) => {
            AttributeValue::N(i.to_string())
        }
        (Some(Ty::BoolEnum(allowed)), Val::Bool(b)) if allowed.contains(&b) => {
            AttributeValue::Bool(b)
        }
        (Some(t @ (Ty::IntEnum(_) | Ty::BoolEnum(_))), Val::Int(_) | Val::Bool(_)) => {
            return Err(format!(
                "`{name}`: not one of its enum's values ({})",
                t.dynamo()
            ))
        }
        (Some(Ty::Set) | None, Val::Set(v)) if v.is_empty() => return Ok(None),
        (Some(Ty::Set) | None, Val::Set(v)) => AttributeValue::Ss(v),
        (
            Some(t @ (Ty::Str | Ty::Ulid | Ty::IsoUtc | Ty::Enum(_) | Ty::Format(_))),
            Val::Str(s),
        ) => {
            check_str(name, &s, t).map_err(|e| e.to_string())?;
            AttributeValue::S(s)
        }
        (None, Val::Str(s)) => AttributeValue::S(s),
        (None, Val::Map(_)) => return Err(format!("`{name}`: a map is not an attribute value")),
        (None, Val::List(_)) => return Err(format!("`{name}`: a list is not an attribute value")),
        (Some(t), v) => return Err(format!("`{name}`: a {} is not a {}", v.kind(), t.dynamo())),
    }))
}

#[cfg(test)]
mod int_tests {
    use super::int;
    use crate::item::AttrError;

    fn reason(v: &str) -> String {
        match int("n", v) {
            Err(AttrError::Invalid { reason, .. }) => reason,
            other => panic!("{v}: {other:?}"),
        }
    }

    /// A number DynamoDB holds but an `int` cannot is out of range (user
    /// finding E5: 10^30 was "not an integer").
    #[test]
    fn a_longer_integer_is_out_of_range_and_a_fraction_is_not_an_integer() {
        assert_eq!(int("n", "-42").ok(), Some(-42));
        assert!(reason("1000000000000000000000000000000").starts_with("an integer out of range"));
        assert!(reason("-9223372036854775809").starts_with("an integer out of range"));
        assert_eq!(reason("1.5"), "not an integer");
        assert_eq!(reason("-"), "not an integer");
    }
}

#[cfg(test)]
mod iso_utc_tests {
    use super::{check_str, Ty};

    /// An `iso-utc` is the one form that sorts by time as a string (keys and
    /// `from:` bounds compare them as strings): RFC 3339's other forms (a
    /// space or a lower-case `t` between date and time, an offset, a
    /// lower-case `z`) sort elsewhere, so they are bad input (user12's
    /// finding 2: `2026-11-28 23:00:00Z` was valid and sorted before
    /// `2026-11-28T01:00:00Z`).
    #[test]
    fn only_the_form_that_sorts_by_time_is_an_iso_utc() {
        for ok in [
            "2026-11-28T23:00:00Z",
            "2026-11-28T23:00:00.5Z",
            "2026-11-28T23:00:00.123456789Z",
        ] {
            assert!(check_str("at", ok, &Ty::IsoUtc).is_ok(), "{ok}");
        }
        for bad in [
            "2026-11-28 23:00:00Z",
            "2026-11-28t23:00:00Z",
            "2026-11-28T23:00:00z",
            "2026-11-28T23:00:00+00:00",
            "2026-11-28T23:00:00.Z",
            "2026-11-28T23:00Z",
            "2026-02-30T00:00:00Z",
            "+2026-11-28T23:00:00Z",
            " 2026-11-28T23:00:00Z",
            "yesterday",
        ] {
            let e = check_str("at", bad, &Ty::IsoUtc).expect_err(bad);
            assert!(
                e.to_string().contains("YYYY-MM-DDTHH:MM:SS[.f]Z"),
                "{bad}: {e}"
            );
        }
    }
}
