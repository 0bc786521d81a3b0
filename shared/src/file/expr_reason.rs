//! Why an evaluation failed, said without the values.

use super::{kind, BUILTINS};
use crate::file::number::{self, Number};

/// Why an evaluation failed, in words that name types, operators and
/// functions but never a value (the values are the user's data: logs carry
/// keys and reasons only).
pub(super) fn reason(e: &cel::ExecutionError) -> String {
    use cel::ExecutionError as E;
    match e {
        E::UnsupportedTargetType { target } => format!("invalid argument type ({})", kind(target)),
        E::NotSupportedAsMethod { method, target } => {
            format!("`{method}` is not a method of a {}", kind(target))
        }
        E::UnsupportedKeyType(v) => format!("a {} cannot be a key", kind(v)),
        E::ValuesNotComparable(a, b) => {
            format!("a {} cannot be compared to a {}", kind(a), kind(b))
        }
        E::UnsupportedBinaryOperator(op, a, b)
            if [a, b].iter().any(|v| Number::from_cel(v).is_some()) =>
        {
            format!(
                "`{op}` does not apply to a {} and a {}: a number is compared and copied exactly, never computed",
                kind(a),
                kind(b)
            )
        }
        E::UnsupportedBinaryOperator(op, a, b) => {
            format!("`{op}` does not apply to a {} and a {}", kind(a), kind(b))
        }
        E::UnsupportedIndex(a, b) => format!("a {} cannot index a {}", kind(a), kind(b)),
        E::FunctionError { function, message } if BUILTINS.contains(&function.as_str()) => {
            format!("`{function}`: {message}")
        }
        E::FunctionError { function, .. } => format!("`{function}` failed on its argument"),
        E::DivisionByZero(_) => "division by zero".to_string(),
        E::RemainderByZero(_) => "remainder by zero".to_string(),
        E::Overflow(op, ..) => format!("integer overflow in `{op}`"),
        E::IndexOutOfBounds(_) => "index out of bounds".to_string(),
        E::NoSuchKey(_) => "no such key".to_string(),
        E::DuplicateKey(_) => "a repeated key".to_string(),
        E::InternalError(_) => "an internal error of the expression engine".to_string(),
        // `got` may be the value itself, as the engine debugs it: only
        // its kind is said.
        E::UnexpectedType { got, want } => format!(
            "an argument is {}, where {} is wanted",
            debugged_kind(got),
            wanted_kind(want)
        ),
        E::InvalidArgumentCount { .. }
        | E::NoSuchOverload(_)
        | E::UndeclaredReference(_)
        | E::MissingArgumentOrTarget => e.to_string(),
        _ => "the expression could not be evaluated".to_string(),
    }
}

/// The kind of a value the expression engine names by its `Debug` text
/// (`DefaultList([...])`) or its type's name (`list`): never the text.
fn debugged_kind(got: &str) -> &'static str {
    let head: String = got
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<String>()
        .to_ascii_lowercase();
    match head.trim_start_matches("default") {
        "list" => "a list",
        "map" => "a map",
        "int" => "an int",
        "uint" => "a uint",
        "float" | "double" => "a double",
        "string" => "a string",
        "bool" => "a bool",
        "bytes" => "bytes",
        "null" => "null",
        "timestamp" => "a timestamp",
        "duration" => "a duration",
        // A `number` (not an int) is an opaque value of its own type,
        // debugged `OpaqueVal<number>` or `Opaque<number>(...)`.
        h if h.starts_with("opaque") => {
            let name = got.split(['<', '>']).nth(1).unwrap_or_default();
            if name == number::CEL_TYPE {
                "a number"
            } else {
                "a value of another type"
            }
        }
        "number" => "a number",
        _ => "a value of another type",
    }
}

/// The kind an argument should have been, from the Rust or CEL type name
/// the expression engine gives (`Arc<String>`, `string`).
fn wanted_kind(want: &str) -> &'static str {
    let w = want.to_ascii_lowercase();
    if w.contains("string") {
        "a string"
    } else if w.contains("vec") || w.contains("list") {
        "a list"
    } else if w.contains("map") {
        "a map"
    } else if w.contains("u64") || w.contains("uint") {
        "a uint"
    } else if w.contains("i64") || w.contains("int") {
        "an int"
    } else if w.contains("f64") || w.contains("double") {
        "a double"
    } else if w.contains("bool") {
        "a bool"
    } else {
        "another type"
    }
}
