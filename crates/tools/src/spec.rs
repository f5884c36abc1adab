//! The parts of the tool seam that need no call context: a tool's description
//! ([`ToolSpec`]) and the boxed future of object-safe async methods ([`BoxFuture`]). Both
//! are re-exported from [`crate::tool`], their public home.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde_json::Value;

/// A boxed future, for object-safe async methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool's description, as offered to a model.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The name the model calls it by (`read_file`).
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON Schema (2020-12, subschemas inlined) of its arguments object.
    pub input_schema: Value,
    /// JSON Schema of the structured part of its result, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}
