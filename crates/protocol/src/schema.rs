//! JSON Schemas (draft 2020-12, the dialect of OpenAPI 3.1) of the wire types, derived from
//! the Rust types with `schemars` (which reads their serde attributes), so they cannot drift
//! from what is actually sent.
//!
//! A schema describes either what *serialising* a type produces (events and responses the
//! server sends: a field skipped when empty is optional, a field with a default is always
//! written) or what *deserialising* one accepts (requests: a field with a default may be
//! left out). [`serialized_schema_for`] and [`schema_for`] give one or the other.
//!
//! Each function returns a standalone root schema: `$schema`, `title`, and the named
//! subschemas it refers to under `$defs` (`"$ref": "#/$defs/EventKind"`). To put schemas in an
//! OpenAPI document's `components/schemas` use [`ComponentSchemas`], whose references point
//! there.
//!
//! `docs/events.schema.json` is [`event_schema`]; a test of this crate keeps it up to date.

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};

use crate::{EventFrame, Op};

/// The schema of one WebSocket event frame ([`EventFrame`]) as `trellis serve` sends it.
pub fn event_schema() -> Value {
    serialized_schema_for::<EventFrame<'static>>()
}

/// The schema of an [`Op`] a client submits (the request body of a submission).
pub fn op_schema() -> Value {
    schema_for::<Op>()
}

/// The schema of the JSON that deserialises into `T`: what a server accepts as a `T` in a
/// request (fields with a default may be absent).
pub fn schema_for<T: JsonSchema + ?Sized>() -> Value {
    let mut schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    plain_descriptions(&mut schema);
    schema
}

/// The schema of the JSON that serialising a `T` produces: what a server sends as a `T` in a
/// response or an event (fields it skips when empty may be absent, every other field is
/// present).
pub fn serialized_schema_for<T: JsonSchema + ?Sized>() -> Value {
    let mut schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    plain_descriptions(&mut schema);
    schema
}

/// Which way a schema describes JSON: see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// What the server accepts: requests (deserialised).
    Request,
    /// What the server sends: responses and events (serialised).
    Response,
}

/// Collects schemas for an OpenAPI 3.1 document: [`ComponentSchemas::schema_for`] returns the
/// schema to use in an operation (usually `{"$ref": "#/components/schemas/Op"}`) and records
/// every named schema it refers to; [`ComponentSchemas::into_components`] gives the map to
/// store under `components/schemas`.
///
/// A type's request and response schemas can differ (a field with a default is optional in a
/// request, always present in a response), so one collector holds one [`Direction`]; when a
/// document needs both, give the response collector a suffix (`Response`) so the two sets of
/// names do not collide.
#[derive(Debug)]
pub struct ComponentSchemas {
    generator: SchemaGenerator,
    suffix: String,
}

/// Where OpenAPI keeps reusable schemas.
const COMPONENTS_PATH: &str = "/components/schemas";

impl ComponentSchemas {
    /// A collector of schemas for `direction`, naming them after their types.
    pub fn new(direction: Direction) -> Self {
        Self::with_suffix(direction, "")
    }

    /// A collector of schemas for `direction` whose component names end with `suffix`
    /// (`RunIdResponse`, …).
    pub fn with_suffix(direction: Direction, suffix: &str) -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = COMPONENTS_PATH.into();
            s.meta_schema = None;
        });
        let settings = match direction {
            Direction::Request => settings.for_deserialize(),
            Direction::Response => settings.for_serialize(),
        };
        Self {
            generator: settings.into_generator(),
            suffix: suffix.to_owned(),
        }
    }

    /// The schema of `T` for an operation: a `$ref` into `components/schemas` for a named
    /// type, the schema itself for an inlined one (strings, numbers, ids).
    pub fn schema_for<T: JsonSchema + ?Sized>(&mut self) -> Value {
        let mut schema = self.generator.subschema_for::<T>().to_value();
        self.rename_refs(&mut schema);
        plain_descriptions(&mut schema);
        schema
    }

    /// The schemas to store under `components/schemas`, by name.
    pub fn into_components(mut self) -> Map<String, Value> {
        let definitions = self.generator.take_definitions(true);
        let mut components = Map::new();
        for (name, mut schema) in definitions {
            self.rename_refs(&mut schema);
            plain_descriptions(&mut schema);
            components.insert(format!("{name}{}", self.suffix), schema);
        }
        components
    }

    /// Appends the suffix to every `$ref` into `components/schemas`.
    fn rename_refs(&self, schema: &mut Value) {
        if self.suffix.is_empty() {
            return;
        }
        match schema {
            Value::Object(obj) => {
                for (key, value) in obj.iter_mut() {
                    match value {
                        Value::String(target)
                            if key == "$ref" && target.starts_with("#/components/schemas/") =>
                        {
                            target.push_str(&self.suffix);
                        }
                        _ => self.rename_refs(value),
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.rename_refs(item);
                }
            }
            _ => {}
        }
    }
}

/// Rewrites the rustdoc links the descriptions inherit from doc comments (``[`Op`]``,
/// ``[`Op`](crate::Op)``) as plain code spans (`` `Op` ``), for readers of the schemas.
fn plain_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(obj) => {
            for (key, value) in obj.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => *text = strip_doc_links(text),
                    _ => plain_descriptions(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// ``[`X`]`` and ``[`X`](path)`` → `` `X` ``; everything else is kept.
fn strip_doc_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        // `after` starts at the opening backquote.
        let after = &rest[start + 1..];
        let link = after[1..]
            .find('`')
            .map(|i| i + 1)
            .filter(|&close| after[close + 1..].starts_with(']'));
        let Some(close) = link else {
            out.push('[');
            rest = after;
            continue;
        };
        out.push_str(&after[..=close]);
        rest = &after[close + 2..];
        if rest.starts_with('(')
            && let Some(paren) = rest.find(')')
        {
            rest = &rest[paren + 1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_links_become_code_spans() {
        assert_eq!(
            strip_doc_links("See [`Op`](crate::Op) and [`Command::Revise`]; [1, 2] and [`x` stay."),
            "See `Op` and `Command::Revise`; [1, 2] and [`x` stay."
        );
        assert_eq!(strip_doc_links("[`a`]"), "`a`");
        assert_eq!(strip_doc_links("[`a` b [`c`]."), "[`a` b `c`.");
        assert_eq!(strip_doc_links("x [`"), "x [`");
    }
}
