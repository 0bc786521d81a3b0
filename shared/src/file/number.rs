//! A `number` attribute's value: any number DynamoDB holds (`N`: up to 38
//! significant digits, negative, fractional, from 1E-130 to below 1E+126 in
//! magnitude), kept exactly as a decimal, never as a binary double.
//!
//! A number is compared (with ints too) and copied; it is rendered as
//! DynamoDB returns it: no exponent, no leading or trailing zeros, no sign
//! on zero (`12.10` is `12.1`, `1e2` is `100`). It is never computed: a
//! model that would add, multiply or sum one is refused when it loads, and an
//! expression that does so on a number inside a `map` or `list` makes the
//! item bad input.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use bigdecimal::BigDecimal;

/// DynamoDB's precision: significant digits a number holds.
const MAX_DIGITS: u64 = 38;
/// The smallest and largest power of ten of a number's leading digit.
const MIN_EXPONENT: i64 = -130;
const MAX_EXPONENT: i64 = 125;

/// An exact decimal number, normalised (trailing zeros dropped), so equal
/// numbers are equal values whatever way they were written.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Number(BigDecimal);

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Number({self})")
    }
}

/// Digits, one `.` at most, an optional exponent: what DynamoDB accepts
/// (no `NaN`, no infinity, no `_` separators).
fn well_formed(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.len() <= 6 && digits(e)
    });
    !(int.is_empty() && frac.is_empty()) && digits(int) && digits(frac) && exponent_ok
}

impl Number {
    /// A number as DynamoDB writes or accepts it; the reason names what is
    /// wrong, never the value.
    pub fn parse(s: &str) -> Result<Number, String> {
        if !well_formed(s) {
            return Err("not a number".to_string());
        }
        let d = BigDecimal::from_str(s).map_err(|_| "not a number".to_string())?;
        let n = Number(d.normalized());
        n.within_limits()?;
        Ok(n)
    }

    fn within_limits(&self) -> Result<(), String> {
        if self.0.sign() == bigdecimal::num_bigint::Sign::NoSign {
            return Ok(());
        }
        let digits = self.0.digits();
        if digits > MAX_DIGITS {
            return Err(format!(
                "a number of more than {MAX_DIGITS} significant digits (DynamoDB's precision)"
            ));
        }
        let (_, scale) = self.0.as_bigint_and_scale();
        let leading = digits as i64 - 1 - scale;
        if !(MIN_EXPONENT..=MAX_EXPONENT).contains(&leading) {
            return Err("a number out of DynamoDB's range (1E-130 to below 1E+126)".to_string());
        }
        Ok(())
    }

    /// The number as an `i64`, when it is an integer that fits one.
    pub fn as_i64(&self) -> Option<i64> {
        if !self.0.is_integer() {
            return None;
        }
        let (int, scale) = self.0.as_bigint_and_scale();
        if scale >= 0 {
            // normalised: no fractional zeros left, so scale is 0 here.
            return i64::try_from(int.as_ref()).ok();
        }
        // A negative scale: an integer with `-scale` zeros after `int`.
        let zeros = u32::try_from(-scale).ok()?;
        let mut out = i64::try_from(int.as_ref()).ok()?;
        for _ in 0..zeros {
            out = out.checked_mul(10)?;
        }
        Some(out)
    }

    /// Whether the number is an integer (of any size).
    pub fn is_integer(&self) -> bool {
        self.0.is_integer()
    }

    /// `n` as a number.
    pub fn from_i64(n: i64) -> Number {
        Number(BigDecimal::from(n).normalized())
    }

    /// How this number orders against an int.
    pub fn cmp_i64(&self, n: i64) -> std::cmp::Ordering {
        self.0.cmp(&BigDecimal::from(n))
    }

    /// As CEL values carry it (an opaque value of the type `number`).
    pub fn to_cel(&self) -> cel::Value {
        cel::Value::Opaque(Arc::new(CelNumber(self.clone())))
    }

    /// The number a CEL value carries, if it is one.
    pub fn from_cel(v: &cel::Value) -> Option<&Number> {
        match v {
            cel::Value::Opaque(o) => o.downcast_ref::<CelNumber>().map(|n| &n.0),
            _ => None,
        }
    }
}

/// As DynamoDB returns it: plain digits, no exponent, no trailing zeros.
impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (_, scale) = self.0.as_bigint_and_scale();
        if scale < 0 {
            f.write_str(&self.0.with_scale(0).to_plain_string())
        } else {
            f.write_str(&self.0.to_plain_string())
        }
    }
}

/// The name of a number's type in CEL (and in messages).
pub const CEL_TYPE: &str = "number";

/// A number inside the expression engine: equal to another number of the
/// same value (numbers that are ints travel as ints, so an int never equals
/// a number), ordered by the comparison built-ins the compiler puts in place
/// of `<`, `<=`, `>` and `>=` ([`compare`]).
#[derive(Debug, PartialEq, Eq)]
pub struct CelNumber(pub Number);

impl cel::objects::Opaque for CelNumber {
    fn runtime_type_name(&self) -> &str {
        CEL_TYPE
    }
}

/// How `a` orders against `b`, exactly, or `None` when the two cannot be
/// ordered (then as CEL orders them: ints, strings, bools, each with its
/// own kind).
pub fn compare(a: &cel::Value, b: &cel::Value) -> Option<std::cmp::Ordering> {
    use cel::Value as V;
    match (a, b) {
        (V::Opaque(_), _) | (_, V::Opaque(_)) => {
            match (Number::from_cel(a), Number::from_cel(b), a, b) {
                (Some(x), Some(y), ..) => Some(x.cmp(y)),
                (Some(x), None, _, V::Int(i)) => Some(x.cmp_i64(*i)),
                (None, Some(y), V::Int(i), _) => Some(y.cmp_i64(*i).reverse()),
                _ => None,
            }
        }
        // CEL's own: ints, uints, strings, bools (doubles never reach an
        // expression: their literals are numbers).
        _ => a.partial_cmp(b),
    }
}

/// The ordering operators and the built-ins that take their place.
pub const ORDERINGS: &[(&str, &str)] = &[
    (cel::common::ast::operators::LESS, "@lt"),
    (cel::common::ast::operators::LESS_EQUALS, "@le"),
    (cel::common::ast::operators::GREATER, "@gt"),
    (cel::common::ast::operators::GREATER_EQUALS, "@ge"),
];

/// Whether `ordering` satisfies the built-in `name` of [`ORDERINGS`].
pub fn holds(name: &str, ordering: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match name {
        "@lt" => ordering == Less,
        "@le" => ordering != Greater,
        "@gt" => ordering == Greater,
        _ => ordering != Less,
    }
}

/// The text of the number literal written at byte `at` of `source`: an
/// optional `-`, digits and a `.`, an optional exponent.
fn literal_text(source: &str, at: usize) -> &str {
    let b = source.as_bytes();
    let mut i = at;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
        i += 1;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            i = j;
        }
    }
    source.get(at..i).unwrap_or("")
}

/// The number a double literal of `source` was written as (`4.8` is 4.8,
/// not the binary double nearest to it), or why it cannot be read exactly.
fn literal(source: &str, at: Option<usize>, parsed: f64) -> Result<Number, String> {
    let text = at.map_or("", |at| literal_text(source, at));
    let exact = Number::parse(text).ok().and_then(|n| {
        // The text must be the literal the parser read (its double).
        let as_double = text.parse::<f64>().ok()?;
        if as_double == parsed {
            Some(n)
        } else if -as_double == parsed {
            Number::parse(&format!("-{text}")).ok()
        } else {
            None
        }
    });
    exact.ok_or_else(|| {
        format!("cannot read the number `{parsed}` exactly as written (write it with digits, a `.` and an optional exponent)")
    })
}

/// `ast` as it is evaluated: each double literal replaced by the exact
/// number it was written as (an int literal when it is one, else a name
/// `@num<i>` bound to `consts[i]`), and each ordering (`<`, `<=`, `>`,
/// `>=`) that may meet a number by the built-in that orders numbers and
/// ints exactly ([`ORDERINGS`]; an ordering of a string or bool literal is
/// CEL's own). No binary double is left to compute with.
pub fn exact(
    ast: &cel::IdedExpr,
    source: &str,
    info: &cel::common::ast::SourceInfo,
) -> Result<(cel::IdedExpr, Vec<Number>), (usize, String)> {
    let mut out = ast.clone();
    let mut consts = Vec::new();
    rewrite(&mut out, source, info, &mut consts)?;
    Ok((out, consts))
}

fn rewrite(
    e: &mut cel::IdedExpr,
    source: &str,
    info: &cel::common::ast::SourceInfo,
    consts: &mut Vec<Number>,
) -> Result<(), (usize, String)> {
    use cel::common::ast::{EntryExpr, Expr as E, LiteralValue as L};
    let at = info.offset_for(e.id).map(|(start, _)| start as usize);
    match &mut e.expr {
        E::Literal(L::Double(d)) => {
            let n = literal(source, at, *d.inner()).map_err(|m| (at.unwrap_or(0), m))?;
            e.expr = match n.as_i64() {
                Some(i) => E::Literal(L::Int(i.into())),
                None => {
                    consts.push(n);
                    E::Ident(format!("@num{}", consts.len() - 1))
                }
            };
        }
        E::Unspecified | E::Literal(_) | E::Ident(_) => {}
        E::Call(c) => {
            if let Some(t) = &mut c.target {
                rewrite(t, source, info, consts)?;
            }
            for a in &mut c.args {
                rewrite(a, source, info, consts)?;
            }
            let text_or_bool = |x: &cel::IdedExpr| {
                matches!(&x.expr, E::Literal(L::String(_) | L::Boolean(_) | L::Null))
            };
            if let Some((_, to)) = ORDERINGS.iter().find(|(op, _)| *op == c.func_name) {
                if c.target.is_none() && c.args.len() == 2 && !c.args.iter().any(text_or_bool) {
                    c.func_name = (*to).to_string();
                }
            }
        }
        E::Comprehension(c) => {
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                rewrite(x, source, info, consts)?;
            }
        }
        E::List(l) => {
            for x in &mut l.elements {
                rewrite(x, source, info, consts)?;
            }
        }
        E::Map(m) => {
            for x in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut x.expr {
                    rewrite(&mut me.key, source, info, consts)?;
                    rewrite(&mut me.value, source, info, consts)?;
                }
            }
        }
        E::Struct(st) => {
            for x in &mut st.entries {
                match &mut x.expr {
                    EntryExpr::StructField(f) => rewrite(&mut f.value, source, info, consts)?,
                    EntryExpr::MapEntry(me) => {
                        rewrite(&mut me.key, source, info, consts)?;
                        rewrite(&mut me.value, source, info, consts)?;
                    }
                }
            }
        }
        E::Select(sel) => rewrite(&mut sel.operand, source, info, consts)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    fn n(s: &str) -> Number {
        Number::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Rendered as DynamoDB returns a number: one text per value.
    #[test]
    fn a_number_renders_as_dynamodb_returns_it() {
        for (written, shown) in [
            ("12.10", "12.1"),
            ("12.1", "12.1"),
            ("1e2", "100"),
            ("1E+2", "100"),
            ("100", "100"),
            ("0.0", "0"),
            ("-0", "0"),
            ("-0.50", "-0.5"),
            ("+3", "3"),
            (".5", "0.5"),
            ("4.8", "4.8"),
            ("1.5E-3", "0.0015"),
            ("1E-130", &format!("0.{}1", "0".repeat(129))),
            (
                "9.9999999999999999999999999999999999999E+125",
                &format!("99999999999999999999999999999999999999{}", "0".repeat(88)),
            ),
            (
                "12345678901234567890123456789012345678",
                "12345678901234567890123456789012345678",
            ),
            (
                "0.12345678901234567890123456789012345678",
                "0.12345678901234567890123456789012345678",
            ),
        ] {
            assert_eq!(n(written).to_string(), shown, "{written}");
            // What it renders parses back to the same number.
            assert_eq!(n(shown), n(written), "{written}");
        }
        assert_eq!(n("12.10"), n("12.1"));
        assert_eq!(n("1e2"), n("100"));
    }

    #[test]
    fn what_dynamodb_refuses_is_not_a_number() {
        for bad in [
            "", "-", ".", "e5", "1e", "NaN", "inf", "1_000", "0x10", "1.2.3", "1e+", " 1", "1 ",
        ] {
            assert_eq!(
                Number::parse(bad),
                Err("not a number".to_string()),
                "{bad:?}"
            );
        }
        let err = Number::parse("123456789012345678901234567890123456789").unwrap_err();
        assert!(err.contains("38 significant digits"), "{err}");
        // Trailing zeros are not significant.
        assert!(Number::parse("1234567890123456789012345678901234567800000").is_ok());
        assert!(Number::parse("1E+126").unwrap_err().contains("range"));
        assert!(Number::parse("1E-131").unwrap_err().contains("range"));
    }

    #[test]
    fn ints_are_told_apart_and_compared_exactly() {
        assert_eq!(n("100").as_i64(), Some(100));
        assert_eq!(n("1e2").as_i64(), Some(100));
        assert_eq!(n("-9223372036854775808").as_i64(), Some(i64::MIN));
        assert_eq!(n("9223372036854775808").as_i64(), None);
        assert_eq!(n("1e30").as_i64(), None);
        assert_eq!(n("4.5").as_i64(), None);
        assert_eq!(Number::from_i64(-7), n("-7.0"));
        // One more than the largest i64 is above it: no double rounds them
        // together.
        assert_eq!(
            n("9223372036854775808").cmp_i64(i64::MAX),
            Ordering::Greater
        );
        assert_eq!(
            n("0.30000000000000000001").cmp(&n("0.3")),
            Ordering::Greater
        );
        let (a, b) = (n("4.8").to_cel(), cel::Value::Int(4));
        assert_eq!(compare(&a, &b), Some(Ordering::Greater));
        assert_eq!(compare(&b, &a), Some(Ordering::Less));
        assert_eq!(compare(&a, &a), Some(Ordering::Equal));
        assert_eq!(compare(&a, &cel::Value::from("4.8")), None);
        assert_eq!(a, n("4.80").to_cel(), "equal numbers are equal values");
    }
}
