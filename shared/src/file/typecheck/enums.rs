//! The enums of the names an expression reads: a literal compared with one
//! (`==`, `!=`, an element of `in [...]`) must be one of its values, or the
//! comparison is the same on every item, a typo's mark (user13 #3).

use cel::common::ast::{operators as op, Expr as E, LiteralValue};
use cel::IdedExpr;

use super::{Bound, Cx, Flaw};
use crate::file::model::Ty;

/// The enums among the names an expression reads, so that a literal
/// compared with one (`status == 'complete'`, `status in ['placed']`) is
/// one of its values: one outside it would make the comparison never (or
/// always) hold, on every item.
#[derive(Default)]
pub struct Enums<'a> {
    /// A name and its enum type (other types are left out).
    pub names: Vec<(&'a str, &'a Ty)>,
    /// Names that are maps of the same attributes (`old`, `new`: the
    /// item's images), whose fields are typed as [`Enums::names`].
    pub images: &'a [&'a str],
}

impl<'a> Enums<'a> {
    /// The enums of `attrs` (name and type), the other types left out.
    pub fn of(attrs: impl IntoIterator<Item = (&'a str, &'a Ty)>) -> Self {
        Enums {
            names: attrs.into_iter().filter(|(_, t)| is_enum(t)).collect(),
            images: &[],
        }
    }

    pub(super) fn get(&self, name: &str) -> Option<&'a Ty> {
        self.names.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }
}

fn is_enum(t: &Ty) -> bool {
    matches!(t, Ty::Enum(_) | Ty::IntEnum(_) | Ty::BoolEnum(_))
}

impl Cx<'_> {
    /// The enum `e` reads, when it reads one: an attribute (`status`), a
    /// field of an image (`old.status`) or of a row (`r.status`); with the
    /// name it is read by.
    fn enum_of(&self, e: &IdedExpr, bound: &Bound) -> Option<(String, &Ty)> {
        let binding = |n: &str| bound.iter().rev().find(|(b, _)| b == n).map(|(_, r)| *r);
        match &e.expr {
            E::Ident(n) if binding(n).is_none() => Some((n.clone(), self.enums.get(n)?)),
            E::Select(s) if !s.test => {
                let E::Ident(m) = &s.operand.expr else {
                    return None;
                };
                let ty = match binding(m) {
                    Some(true) => self.rows?.enums.get(&s.field)?,
                    Some(false) => return None,
                    None if self.enums.images.contains(&m.as_str()) => self.enums.get(&s.field)?,
                    None => return None,
                };
                Some((format!("{m}.{}", s.field), ty))
            }
            _ => None,
        }
    }

    /// A literal compared (`==`, `!=`, `in [...]`) with an enum that is
    /// none of its values: the comparison's result would be the same on
    /// every item, a typo's mark.
    pub(super) fn enum_literals(
        &self,
        f: &str,
        args: &[IdedExpr],
        bound: &Bound,
    ) -> Result<(), Flaw> {
        let (pairs, list): (Vec<(usize, usize)>, bool) = match f {
            op::EQUALS | op::NOT_EQUALS if args.len() == 2 => (vec![(0, 1), (1, 0)], false),
            op::IN if args.len() == 2 => (vec![(0, 1)], true),
            _ => return Ok(()),
        };
        for (side, other) in pairs {
            let Some((name, ty)) = self.enum_of(&args[side], bound) else {
                continue;
            };
            let literals: Vec<&IdedExpr> = match (&args[other].expr, list) {
                (E::List(l), true) => l.elements.iter().collect(),
                (_, true) => continue,
                (_, false) => vec![&args[other]],
            };
            for lit in literals {
                let E::Literal(v) = &lit.expr else {
                    continue;
                };
                let Some(outside) = outside(ty, v) else {
                    continue;
                };
                let never = match f {
                    op::NOT_EQUALS => "so `!=` is true of every item",
                    op::IN => "so that element of the list matches no item",
                    _ => "so `==` is true of no item",
                };
                return Err(Flaw {
                    offset: self.at(lit),
                    message: format!(
                        "{} is not a value of `{name}`, one of {} (its enum), {never}{}",
                        outside.shown, outside.values, outside.closest
                    ),
                });
            }
        }
        Ok(())
    }
}

/// A literal outside an enum, in messages.
struct Outside {
    shown: String,
    values: String,
    closest: String,
}

/// `v` when it is of the enum's kind and none of its values (a literal of
/// another kind is a type error, reported by the type check).
fn outside(ty: &Ty, v: &LiteralValue) -> Option<Outside> {
    let list = |vals: Vec<String>| vals.join(", ");
    match (ty, v) {
        (Ty::Enum(vals), LiteralValue::String(s)) if !vals.iter().any(|x| x == s.inner()) => {
            let s = s.inner();
            Some(Outside {
                shown: format!("'{s}'"),
                values: list(vals.iter().map(|x| format!("'{x}'")).collect()),
                closest: closest(s, vals)
                    .map(|c| format!(" (did you mean '{c}'?)"))
                    .unwrap_or_default(),
            })
        }
        (Ty::IntEnum(vals), LiteralValue::Int(i)) if !vals.contains(i.inner()) => Some(Outside {
            shown: i.to_string(),
            values: list(vals.iter().map(i64::to_string).collect()),
            closest: String::new(),
        }),
        (Ty::BoolEnum(vals), LiteralValue::Boolean(b)) if !vals.contains(b.inner()) => {
            Some(Outside {
                shown: b.to_string(),
                values: list(vals.iter().map(bool::to_string).collect()),
                closest: String::new(),
            })
        }
        _ => None,
    }
}

/// The enum value closest to `s`: one equal to it but for case, or the
/// most alike (case aside) when it is alike enough.
fn closest<'a>(s: &str, vals: &'a [String]) -> Option<&'a str> {
    let lower = s.to_lowercase();
    vals.iter()
        .map(|v| (strsim::jaro_winkler(&lower, &v.to_lowercase()), v.as_str()))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, v)| v)
}
