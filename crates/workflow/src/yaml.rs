//! A YAML document as a tree of nodes that remember where they were written.
//!
//! `yaml_serde` (the maintained serde_yaml fork) reports a position only for the first
//! deserialisation error and keeps none for values, so it cannot say where a *semantic*
//! problem is (a routing target naming a missing stage, a loop). `saphyr-parser` is a small,
//! maintained, pure-Rust YAML 1.2 event parser (two dependencies) whose events carry spans; this
//! module folds its events into a tree with a [`Pos`] on every node, resolving plain scalars with
//! the YAML 1.2 core schema.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde::Serialize;
use serde_json::Value;

/// A position in a file: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// A value in the tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Yaml {
    /// `~`, `null` or an empty value.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string (quoted, block, or a plain scalar that is nothing else).
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in source order (duplicate keys are kept so they can be reported).
    Map(Vec<(Node, Node)>),
}

/// A value with its position and, for scalars, the text as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Yaml,
    /// Where it starts.
    pub pos: Pos,
    /// The scalar's text (empty for collections).
    pub text: String,
}

impl Node {
    /// The mapping entries, if this is a mapping.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Yaml::Map(m) => Some(m),
            _ => None,
        }
    }

    /// Whether this is a scalar (not a sequence or mapping).
    pub fn is_scalar(&self) -> bool {
        !matches!(self.value, Yaml::Seq(_) | Yaml::Map(_))
    }

    /// A short name of the value's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self.value {
            Yaml::Null => "null",
            Yaml::Bool(_) => "a boolean",
            Yaml::Int(_) => "an integer",
            Yaml::Float(_) => "a number",
            Yaml::Str(_) => "a string",
            Yaml::Seq(_) => "a list",
            Yaml::Map(_) => "a mapping",
        }
    }

    /// The tree as JSON (mapping keys become their scalar text).
    pub fn to_json(&self) -> Value {
        match &self.value {
            Yaml::Null => Value::Null,
            Yaml::Bool(b) => Value::Bool(*b),
            Yaml::Int(i) => Value::from(*i),
            Yaml::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(self.text.clone())),
            Yaml::Str(s) => Value::String(s.clone()),
            Yaml::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Yaml::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.text.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// A syntax error.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntaxError {
    /// Where.
    pub pos: Pos,
    /// What.
    pub message: String,
}

/// Parses the first document of `text`. An empty document is `Null` at 1:1.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder::default();
    let mut documents = 0;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| SyntaxError {
            pos: Pos {
                line: e.marker().line(),
                column: e.marker().col() + 1,
            },
            message: e.info().to_owned(),
        })?;
        let pos = Pos {
            line: span.start.line(),
            column: span.start.col() + 1,
        };
        match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxError {
                        pos,
                        message: "a workflow file holds one YAML document; this is a second one"
                            .into(),
                    });
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tagged_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !tagged_str {
                    resolve(&text)
                } else {
                    Yaml::Str(text.to_string())
                };
                builder.value(
                    Node {
                        value,
                        pos,
                        text: text.into_owned(),
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) => builder.open(Yaml::Seq(Vec::new()), pos, anchor),
            Event::MappingStart(anchor, _) => builder.open(Yaml::Map(Vec::new()), pos, anchor),
            Event::SequenceEnd | Event::MappingEnd => builder.close(),
            Event::Alias(id) => {
                let node = builder.anchors.get(&id).cloned().ok_or(SyntaxError {
                    pos,
                    message: "alias to an unknown anchor".into(),
                })?;
                builder.value(node, 0);
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
    }
    Ok(builder.root.unwrap_or(Node {
        value: Yaml::Null,
        pos: Pos { line: 1, column: 1 },
        text: String::new(),
    }))
}

#[derive(Default)]
struct Builder {
    /// Open collections, with their anchor and, for mappings, a pending key.
    stack: Vec<(Node, usize, Option<Node>)>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
}

impl Builder {
    fn open(&mut self, value: Yaml, pos: Pos, anchor: usize) {
        let node = Node {
            value,
            pos,
            text: String::new(),
        };
        self.stack.push((node, anchor, None));
    }

    fn close(&mut self) {
        if let Some((node, anchor, _)) = self.stack.pop() {
            self.value(node, anchor);
        }
    }

    fn value(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let Some((parent, _, key)) = self.stack.last_mut() else {
            self.root.get_or_insert(node);
            return;
        };
        match &mut parent.value {
            Yaml::Seq(items) => items.push(node),
            Yaml::Map(entries) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
            _ => {}
        }
    }
}

/// YAML 1.2 core schema resolution of a plain scalar.
fn resolve(text: &str) -> Yaml {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Yaml::Null,
        "true" | "True" | "TRUE" => return Yaml::Bool(true),
        "false" | "False" | "FALSE" => return Yaml::Bool(false),
        ".inf" | "+.inf" | ".Inf" | "+.Inf" | ".INF" | "+.INF" => {
            return Yaml::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Yaml::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Yaml::Float(f64::NAN),
        _ => {}
    }
    let int = if let Some(hex) = text.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = text.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()
    } else if text
        .trim_start_matches(['-', '+'])
        .bytes()
        .all(|b| b.is_ascii_digit())
    {
        text.parse().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Yaml::Int(i);
    }
    let numeric = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        && text.bytes().any(|b| b.is_ascii_digit());
    match text.parse::<f64>() {
        Ok(f) if numeric => Yaml::Float(f),
        _ => Yaml::Str(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_scalars() {
        let doc = parse("a: 1\nb:\n  - \"2\"\n  - x # c\nc: ~\nd: 1.5\n").unwrap();
        let m = doc.as_map().unwrap();
        assert_eq!(m[0].1.value, Yaml::Int(1));
        assert_eq!(m[0].1.pos, Pos { line: 1, column: 4 });
        let Yaml::Seq(items) = &m[1].1.value else {
            panic!()
        };
        assert_eq!(items[0].value, Yaml::Str("2".into()));
        assert_eq!(items[1].pos, Pos { line: 4, column: 5 });
        assert_eq!(m[2].1.value, Yaml::Null);
        assert_eq!(m[3].1.value, Yaml::Float(1.5));
        assert_eq!(
            doc.to_json(),
            serde_json::json!({"a": 1, "b": ["2", "x"], "c": null, "d": 1.5})
        );
    }

    #[test]
    fn syntax_error_has_a_position() {
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.pos.line >= 1, "{e:?}");
        assert!(!e.message.is_empty());
    }

    #[test]
    fn anchors_and_aliases() {
        let doc = parse("a: &x {k: 1}\nb: *x\n").unwrap();
        assert_eq!(
            doc.to_json(),
            serde_json::json!({"a": {"k": 1}, "b": {"k": 1}})
        );
    }
}
