//! A configurable fake tool for the suites that exercise the tool registry, DAGs, the agent
//! loop and speculation: a spec (input and output schemas), read-only or writing, optionally
//! asking the user first (through the policy gate) or taking a while, counting its calls by
//! name, and answering with what a closure returns.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use trellis_tools::config::Action;
use trellis_tools::tool::BoxFuture;
use trellis_tools::{Tool, ToolContext, ToolOutput, ToolSpec};

/// Calls per tool name.
pub type Runs = Arc<Mutex<BTreeMap<String, usize>>>;

/// How many times `tool` ran.
pub fn count(runs: &Runs, tool: &str) -> usize {
    runs.lock()
        .map(|r| r.get(tool).copied().unwrap_or(0))
        .unwrap_or(0)
}

/// What a fake tool does with its arguments.
pub type Behaviour =
    dyn Fn(Value) -> BoxFuture<'static, trellis_tools::Result<ToolOutput>> + Send + Sync;

/// A JSON Schema object with string-typed `properties` (name → type) and `required` names.
pub fn object_schema(properties: &[(&str, &str)], required: &[&str]) -> Value {
    let props: serde_json::Map<String, Value> = properties
        .iter()
        .map(|(name, ty)| ((*name).to_owned(), json!({ "type": ty })))
        .collect();
    json!({"type": "object", "properties": props, "required": required})
}

/// A fake tool (build with [`FakeTool::new`], then [`FakeTool::arc`]).
pub struct FakeTool {
    spec: ToolSpec,
    read_only: bool,
    asks: bool,
    delay: Duration,
    runs: Option<Runs>,
    run: Arc<Behaviour>,
}

impl FakeTool {
    /// A read-only tool `name` taking any object, answering `"<name> <args>"`.
    pub fn new(name: &str) -> Self {
        let label = name.to_owned();
        Self {
            spec: ToolSpec {
                name: name.into(),
                description: format!("The {name} tool."),
                input_schema: json!({"type": "object"}),
                output_schema: None,
            },
            read_only: true,
            asks: false,
            delay: Duration::ZERO,
            runs: None,
            run: Arc::new(move |args| {
                let text = format!("{label} {args}");
                Box::pin(async move { Ok(ToolOutput::text(text)) })
            }),
        }
    }

    /// Its description.
    pub fn description(mut self, text: &str) -> Self {
        self.spec.description = text.into();
        self
    }

    /// Its input schema.
    pub fn input(mut self, schema: Value) -> Self {
        self.spec.input_schema = schema;
        self
    }

    /// Its output schema.
    pub fn output(mut self, schema: Value) -> Self {
        self.spec.output_schema = Some(schema);
        self
    }

    /// It changes things (not read-only).
    pub fn writes(mut self) -> Self {
        self.read_only = false;
        self
    }

    /// It asks the user first (an `ask` of the policy gate).
    pub fn asks(mut self) -> Self {
        self.asks = true;
        self
    }

    /// Each call takes `delay` before it answers.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Counts its calls in `runs`.
    pub fn counting(mut self, runs: &Runs) -> Self {
        self.runs = Some(runs.clone());
        self
    }

    /// Answers with `f(args)`.
    pub fn returns(
        mut self,
        f: impl Fn(Value) -> trellis_tools::Result<ToolOutput> + Send + Sync + 'static,
    ) -> Self {
        let f = Arc::new(f);
        self.run = Arc::new(move |args| {
            let f = f.clone();
            Box::pin(async move { f(args) })
        });
        self
    }

    /// Answers with what `f(args)` resolves to.
    pub fn runs(
        mut self,
        f: impl Fn(Value) -> BoxFuture<'static, trellis_tools::Result<ToolOutput>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.run = Arc::new(f);
        self
    }

    /// Answers with `text` and structured `data` whatever the arguments.
    pub fn answers(self, text: &str, data: Value) -> Self {
        let text = text.to_owned();
        self.returns(move |_| {
            Ok(ToolOutput {
                text: text.clone(),
                data: Some(data.clone()),
            })
        })
    }

    /// The tool, for a registry.
    pub fn arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for FakeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, trellis_tools::Result<ToolOutput>> {
        Box::pin(async move {
            if self.asks {
                ctx.gate(Action::Ask, "it wants to".into(), None).await?;
            }
            if let Some(runs) = &self.runs
                && let Ok(mut r) = runs.lock()
            {
                *r.entry(self.spec.name.clone()).or_default() += 1;
            }
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            (self.run)(args).await
        })
    }
}
