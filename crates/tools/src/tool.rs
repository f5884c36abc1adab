//! The tool seam: what a tool is, how it describes itself, and what a call returns.
//!
//! A tool implements [`Tool`] (object safe: a name, a [`ToolSpec`] and an async `call` on
//! JSON arguments). Most tools implement the typed [`TypedTool`] instead — input and output
//! are Rust types, the JSON Schemas are derived from them with `schemars` — and are wrapped
//! into a `dyn Tool` by [`typed`]. The seam knows nothing about model providers: the agent
//! layer turns each [`ToolSpec`] into its provider's tool definition.

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::ToolContext;
use crate::error::{Error, Result};

pub use crate::spec::{BoxFuture, ToolSpec};

/// What a successful call returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// The structured result (matching the tool's output schema), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ToolOutput {
    /// A text-only output.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            data: None,
        }
    }
}

/// An object-safe tool.
pub trait Tool: Send + Sync {
    /// The tool's description.
    fn spec(&self) -> &ToolSpec;

    /// Whether the tool only reads: calling it changes nothing, so it may run beside other
    /// calls and be run ahead of the model (speculation). Unknown tools say no.
    fn read_only(&self) -> bool {
        false
    }

    /// Runs the tool on JSON arguments. Errors become error results for the model (see
    /// [`crate::Registry::call`]); cancellation through `ctx.cancel` yields
    /// [`Error::Cancelled`].
    fn call<'a>(&'a self, ctx: &'a ToolContext, args: Value) -> BoxFuture<'a, Result<ToolOutput>>;
}

/// A tool with typed input and output.
pub trait TypedTool: Send + Sync + 'static {
    /// Arguments, deserialised from the model's JSON.
    type Input: DeserializeOwned + JsonSchema + Send;
    /// The structured result.
    type Output: Serialize + JsonSchema + Send;

    /// The tool's name.
    fn name(&self) -> &'static str;

    /// What the tool does, for the model.
    fn description(&self) -> &'static str;

    /// Whether the output is only text (no output schema is advertised then).
    fn text_only(&self) -> bool {
        false
    }

    /// Whether the tool only reads (see [`Tool::read_only`]).
    fn read_only(&self) -> bool {
        false
    }

    /// Runs the tool.
    fn run(
        &self,
        ctx: &ToolContext,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output>> + Send;

    /// Renders the output as the text the model reads.
    fn render(&self, output: &Self::Output) -> String;
}

/// JSON Schema of `T`: 2020-12, subschemas inlined, no `$schema` key — the shape model
/// APIs accept for tool parameters.
pub fn schema_for<T: JsonSchema + ?Sized>() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    schema.to_value()
}

/// Wraps a [`TypedTool`] into a shareable `dyn Tool`.
pub fn typed<T: TypedTool>(tool: T) -> Arc<dyn Tool> {
    let spec = ToolSpec {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        input_schema: schema_for::<T::Input>(),
        output_schema: (!tool.text_only()).then(schema_for::<T::Output>),
    };
    Arc::new(Typed { tool, spec })
}

struct Typed<T> {
    tool: T,
    spec: ToolSpec,
}

impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        self.tool.read_only()
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: Value) -> BoxFuture<'a, Result<ToolOutput>> {
        Box::pin(async move {
            // Models sometimes send `null` for a tool without arguments.
            let args = if args.is_null() {
                Value::Object(Default::default())
            } else {
                args
            };
            let input: T::Input = serde_json::from_value(args).map_err(|e| Error::InvalidArgs {
                tool: self.spec.name.clone(),
                message: e.to_string(),
            })?;
            let output = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(Error::Cancelled),
                out = self.tool.run(ctx, input) => out?,
            };
            let text = self.tool.render(&output);
            let data = if self.tool.text_only() {
                None
            } else {
                serde_json::to_value(&output).ok()
            };
            Ok(ToolOutput { text, data })
        })
    }
}
