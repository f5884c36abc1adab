//! Canonical JSON: objects with their keys sorted, at every depth.
//!
//! `serde_json` keeps a [`serde_json::Map`]'s insertion order when any crate in the build
//! enables its `preserve_order` feature (cargo unifies features across the workspace; the
//! `agent-client-protocol` crate enables it), and sorts keys otherwise. Whatever a model sees
//! — a prompt, a tool's or a structured answer's JSON Schema, the grammar compiled from one, a
//! tool call echoed back — goes through here, so it does not depend on which crates are
//! linked into the binary.

use serde::Serialize;
use serde_json::Value;

/// What kind of JSON value `v` is, as an error message says it (`a string`, `a list`, …).
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Sorts the keys of every object in `value`, at every depth, in place.
pub fn canonicalise(value: &mut Value) {
    value.sort_all_objects();
}

/// `value` with the keys of every object sorted, at every depth.
#[must_use]
pub fn canonical(mut value: Value) -> Value {
    canonicalise(&mut value);
    value
}

/// The compact JSON text of `value` with the keys of every object sorted. Struct fields
/// keep their declaration order only when they are not turned into a map first; this always
/// sorts.
///
/// # Errors
/// When `value` cannot be represented as JSON (a map with non-string keys).
pub fn to_canonical_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(&canonical(serde_json::to_value(value)?))
}

/// Like [`to_canonical_string`], indented.
///
/// # Errors
/// When `value` cannot be represented as JSON (a map with non-string keys).
pub fn to_canonical_string_pretty<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&canonical(serde_json::to_value(value)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::Map;

    /// An object whose insertion order is not sorted, nested in an array and an object.
    fn unsorted() -> Value {
        let mut inner = Map::new();
        inner.insert("zeta".into(), Value::from(1));
        inner.insert("alpha".into(), Value::from(2));
        let mut outer = Map::new();
        outer.insert("z".into(), Value::Array(vec![Value::Object(inner.clone())]));
        outer.insert("m".into(), Value::Object(inner));
        outer.insert("a".into(), Value::Null);
        Value::Object(outer)
    }

    #[test]
    fn keys_are_sorted_at_every_depth_whatever_the_insertion_order() {
        let expected = r#"{"a":null,"m":{"alpha":2,"zeta":1},"z":[{"alpha":2,"zeta":1}]}"#;
        assert_eq!(to_canonical_string(&unsorted()).unwrap(), expected);
        assert_eq!(
            serde_json::to_string(&canonical(unsorted())).unwrap(),
            expected
        );
        let pretty = to_canonical_string_pretty(&unsorted()).unwrap();
        assert!(pretty.find("\"a\"").unwrap() < pretty.find("\"m\"").unwrap());
    }

    #[test]
    fn struct_fields_become_sorted_too() {
        #[derive(Serialize)]
        struct S {
            zeta: u8,
            alpha: u8,
        }
        assert_eq!(
            to_canonical_string(&S { zeta: 1, alpha: 2 }).unwrap(),
            r#"{"alpha":2,"zeta":1}"#
        );
    }
}
