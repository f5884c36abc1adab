//! The agent loop: the model answers, the tools it calls run, their results go back, until
//! the model gives its final report or runs out of turns.
//!
//! - Streaming: text deltas and tool calls are reported through an [`EventSink`] as they
//!   happen (progress for the user; not persisted — tool calls are recorded by the tool
//!   registry's sink).
//! - Tool errors come back to the model as tool results; they never abort the agent.
//! - Interrupts: when a tool needs the user ([`GraphInteraction`]) or a call would exceed a
//!   budget, the loop stops and returns [`AgentOutcome::Interrupted`] with its conversation
//!   as scratch; [`AgentRun::run`] with the scratch and the answer continues where it stopped,
//!   without repeating model calls or tool calls that already ran.
//! - The final answer is parsed into a [`StageReport`] with the normaliser; if it cannot be,
//!   one structured call asks for the report (grammar-constrained on the embedded model).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_llm::normalise::{NormaliseOptions, normalise};
use trellis_llm::{
    BudgetExceeded, BudgetLedger, ChatRequest, Completion, Limit, Message, ModelProvider,
    StreamEvent, StructuredOptions, ToolCall, ToolSpec, Usage, collect_with, complete_structured,
};
use trellis_protocol::{Answer, Interrupt, InterruptKind};
use trellis_tools::{Registry, ToolEnv};

use crate::error::{Error, Result};
use crate::interaction::GraphInteraction;
use crate::output::StageReport;
use crate::prompt::truncate;
use crate::roles::RoleSpec;

/// Progress of an agent, for the user.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// Model text as it streams.
    Text {
        /// The graph node.
        node: String,
        /// The new text.
        text: String,
    },
    /// A tool call about to run.
    ToolCall {
        /// The graph node.
        node: String,
        /// The tool.
        tool: String,
        /// Its arguments (shortened).
        args: String,
    },
    /// A tool call's result.
    ToolResult {
        /// The graph node.
        node: String,
        /// The tool.
        tool: String,
        /// Whether it succeeded.
        ok: bool,
        /// The result's first line (shortened).
        summary: String,
    },
    /// Anything else worth a line (a repaired answer, a forced report…).
    Note {
        /// The graph node.
        node: String,
        /// The text.
        text: String,
    },
}

/// Where agent events go.
pub type EventSink = Arc<dyn Fn(AgentEvent) + Send + Sync>;

/// One activation of an agent.
pub struct AgentRun {
    /// The graph node (for events and interrupts).
    pub node: String,
    /// The role.
    pub role: RoleSpec,
    /// The model (usually budgeted).
    pub provider: Arc<dyn ModelProvider>,
    /// The tools; the role's name is its allow list in the registry.
    pub tools: Arc<Registry>,
    /// The tools' environment (workspace, policy, interaction).
    pub env: ToolEnv,
    /// The interrupt-backed interaction, when `env.interaction` is one.
    pub gate: Option<Arc<GraphInteraction>>,
    /// The run's budget ledger, to grant more budget when the user agrees.
    pub ledger: Option<Arc<BudgetLedger>>,
    /// The system prompt and context messages.
    pub messages: Vec<Message>,
    /// Model turns allowed.
    pub max_turns: u32,
    /// Progress.
    pub events: Option<EventSink>,
    /// Stops the agent.
    pub cancel: CancellationToken,
}

/// What an activation ended with.
#[derive(Clone, Debug)]
pub enum AgentOutcome {
    /// The agent reported.
    Done(AgentReport),
    /// The agent waits for the user; resume with the scratch and the answer.
    Interrupted {
        /// What to ask.
        interrupt: Interrupt,
        /// The saved conversation.
        scratch: Value,
    },
}

/// A finished agent's report and what it took.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgentReport {
    /// The typed output.
    pub report: StageReport,
    /// Model turns used.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tokens used (as reported or counted).
    pub usage: Usage,
    /// Repairs the normaliser applied to the final answer, and other notes.
    pub notes: Vec<String>,
}

/// The conversation saved in an interrupt's scratch.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Saved {
    messages: Vec<Message>,
    turns: u32,
    tool_calls: u32,
    usage: Usage,
    waiting: Waiting,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Waiting {
    /// The tool call at `next` of the last assistant turn's `calls` waits for the user.
    Tools { calls: Vec<ToolCall>, next: usize },
    /// A model call was refused by the budget.
    Budget { exceeded: BudgetExceeded },
    /// Nothing (a fresh state).
    Nothing,
}

/// How much a "yes" to a budget interrupt grants: what the refused call needed plus half of
/// the original limit, so the run does not stop again at the very next call.
fn default_grant(e: &BudgetExceeded) -> f64 {
    e.requested + e.limit / 2.0
}

impl AgentRun {
    fn emit(&self, event: AgentEvent) {
        if let Some(sink) = &self.events {
            sink(event);
        }
    }

    fn note(&self, text: impl Into<String>) {
        self.emit(AgentEvent::Note {
            node: self.node.clone(),
            text: text.into(),
        });
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools
            .specs_for(&self.role.name)
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                parameters: t.input_schema,
            })
            .collect()
    }

    /// Runs the agent, or continues it from an interrupt's `scratch` with the user's answer.
    pub async fn run(self, resume: Option<(Value, Answer)>) -> Result<AgentOutcome> {
        let mut st = Saved {
            messages: self.messages.clone(),
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            waiting: Waiting::Nothing,
        };
        if let Some((scratch, answer)) = resume {
            st = serde_json::from_value(scratch).map_err(|e| Error::Resume(e.to_string()))?;
            match std::mem::replace(&mut st.waiting, Waiting::Nothing) {
                Waiting::Tools { calls, next } => {
                    if let Some(gate) = &self.gate {
                        gate.preset(answer);
                    }
                    if let Some(out) = self.execute(&mut st, calls, next).await? {
                        return Ok(out);
                    }
                }
                Waiting::Budget { exceeded } => {
                    if !answer.is_approval() && grant_of(&answer).is_none() {
                        return Ok(AgentOutcome::Done(self.budget_refused(&st, &exceeded)));
                    }
                    let extra = grant_of(&answer).unwrap_or_else(|| default_grant(&exceeded));
                    if let Some(ledger) = &self.ledger {
                        let limit = match exceeded.unit {
                            trellis_llm::budget::BudgetUnit::Tokens => Limit {
                                tokens: Some(extra.ceil() as u64),
                                cost_usd: None,
                            },
                            trellis_llm::budget::BudgetUnit::CostUsd => Limit {
                                tokens: None,
                                cost_usd: Some(extra),
                            },
                        };
                        ledger.grant(&exceeded.scope, limit);
                        self.note(format!("{} granted {extra:.0} more", exceeded.scope));
                    }
                }
                Waiting::Nothing => {}
            }
        }
        let mut specs = self.tool_specs();
        while st.turns < self.max_turns {
            let mut request = ChatRequest {
                tools: specs.clone(),
                ..ChatRequest::new(st.messages.clone())
            };
            if let Some(note) = self.fit(&mut request) {
                self.note(note);
                st.messages = request.messages.clone();
                specs = request.tools.clone();
            }
            let completion = match self.turn(request).await {
                Ok(c) => c,
                Err(trellis_llm::Error::Budget(exceeded)) => {
                    return Ok(self.budget_interrupt(st, exceeded));
                }
                Err(trellis_llm::Error::Cancelled) => return Err(Error::Cancelled),
                Err(e) => return Err(e.into()),
            };
            st.turns += 1;
            st.usage.add(&completion.usage);
            if completion.tool_calls.is_empty() {
                return self.finish(st, completion.text, false).await;
            }
            st.messages.push(completion.to_message());
            if let Some(out) = self.execute(&mut st, completion.tool_calls, 0).await? {
                return Ok(out);
            }
        }
        self.note(format!(
            "turn limit ({}) reached; asking for the report",
            self.max_turns
        ));
        self.finish(st, String::new(), true).await
    }

    /// Shrinks `request` until it fits the model's context window with room for the answer:
    /// the longest context or tool-result message is cut first (never the system prompt or
    /// the task), then the tool descriptions go. Returns a note when it changed anything.
    fn fit(&self, request: &mut ChatRequest) -> Option<String> {
        let window = u64::from(self.provider.info().context_window?);
        let reserve = u64::from(request.max_tokens.unwrap_or(512)).min(window / 3);
        let mut cuts = 0;
        let mut dropped_tools = false;
        for _ in 0..16 {
            let used = self.provider.count_tokens(request).ok()?.tokens;
            if used + reserve <= window {
                break;
            }
            let last = request.messages.len().saturating_sub(1);
            let longest = request
                .messages
                .iter()
                .enumerate()
                .filter(|(i, m)| {
                    *i > 0
                        && m.role != trellis_llm::Role::System
                        && !m
                            .content
                            .starts_with(crate::prompt::ContextKind::Task.heading())
                        && (*i < last || m.role == trellis_llm::Role::Tool)
                        && m.content.len() > 600
                })
                .max_by_key(|(_, m)| m.content.len())
                .map(|(i, _)| i);
            match longest {
                Some(i) => {
                    let m = &mut request.messages[i];
                    let keep = m.content.len() * 3 / 5;
                    m.content = truncate(&m.content, keep);
                    cuts += 1;
                }
                None if !request.tools.is_empty() => {
                    request.tools.clear();
                    dropped_tools = true;
                }
                None => break,
            }
        }
        (cuts > 0 || dropped_tools).then(|| {
            format!(
                "fitted the prompt into the {window}-token context: {cuts} cut(s){}",
                if dropped_tools {
                    ", tool descriptions dropped"
                } else {
                    ""
                }
            )
        })
    }

    /// One streamed model call; text is shown as it arrives.
    async fn turn(&self, request: ChatRequest) -> trellis_llm::Result<Completion> {
        let stream = self.provider.stream(request, self.cancel.clone());
        let completion = collect_with(stream, |event| {
            if let StreamEvent::TextDelta { text } = event {
                self.emit(AgentEvent::Text {
                    node: self.node.clone(),
                    text: text.clone(),
                });
            }
        })
        .await?;
        if !completion.text.is_empty() {
            // Ends the streamed line, so the progress printer shows it now.
            self.emit(AgentEvent::Text {
                node: self.node.clone(),
                text: "\n".into(),
            });
        }
        Ok(completion)
    }

    /// Runs `calls[next..]`, appending their results; returns an interrupt if one waits for
    /// the user.
    async fn execute(
        &self,
        st: &mut Saved,
        calls: Vec<ToolCall>,
        next: usize,
    ) -> Result<Option<AgentOutcome>> {
        for i in next..calls.len() {
            let call = &calls[i];
            if self.cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            self.emit(AgentEvent::ToolCall {
                node: self.node.clone(),
                tool: call.name.clone(),
                args: truncate(&call.arguments, 160),
            });
            let content = match call.arguments_json() {
                Err(e) => format!(
                    "error: the arguments of `{}` are not valid JSON ({e}); call it again with a JSON object",
                    call.name
                ),
                Ok(args) => {
                    let result = self
                        .tools
                        .call(
                            &self.env,
                            &self.role.name,
                            &call.name,
                            args,
                            self.cancel.clone(),
                        )
                        .await;
                    if result.cancelled {
                        return Err(Error::Cancelled);
                    }
                    if let Some(pending) = self.gate.as_ref().and_then(|g| g.take_pending()) {
                        let interrupt = pending.interrupt(&self.node);
                        st.waiting = Waiting::Tools {
                            calls: calls.clone(),
                            next: i,
                        };
                        let scratch =
                            serde_json::to_value(&*st).map_err(|e| Error::Resume(e.to_string()))?;
                        return Ok(Some(AgentOutcome::Interrupted { interrupt, scratch }));
                    }
                    self.emit(AgentEvent::ToolResult {
                        node: self.node.clone(),
                        tool: call.name.clone(),
                        ok: !result.is_error,
                        summary: truncate(result.content.lines().next().unwrap_or_default(), 160),
                    });
                    if result.is_error {
                        format!("error: {}", result.content)
                    } else {
                        result.content
                    }
                }
            };
            st.tool_calls += 1;
            st.messages
                .push(Message::tool_result(call.id.clone(), content));
        }
        Ok(None)
    }

    fn budget_interrupt(&self, mut st: Saved, exceeded: BudgetExceeded) -> AgentOutcome {
        let interrupt = Interrupt {
            kind: InterruptKind::Approval,
            prompt: format!(
                "{}: {exceeded}. Grant {:.0} more (yes), a specific amount ({{\"grant\": N}}), or stop this stage (no)?",
                self.node,
                default_grant(&exceeded)
            ),
            data: json!({ "budget": exceeded }),
        };
        st.waiting = Waiting::Budget { exceeded };
        AgentOutcome::Interrupted {
            interrupt,
            scratch: serde_json::to_value(&st).unwrap_or(Value::Null),
        }
    }

    fn budget_refused(&self, st: &Saved, exceeded: &BudgetExceeded) -> AgentReport {
        AgentReport {
            report: StageReport {
                failure: true,
                output: format!("stopped: {exceeded}; the user did not grant more budget"),
                ..StageReport::default()
            },
            turns: st.turns,
            tool_calls: st.tool_calls,
            usage: st.usage,
            notes: vec!["budget refused".into()],
        }
    }

    /// Parses the final answer, or asks once for a structured report.
    async fn finish(&self, mut st: Saved, text: String, forced: bool) -> Result<AgentOutcome> {
        let mut notes = Vec::new();
        if !forced {
            match normalise::<StageReport>(&text, NormaliseOptions::default()) {
                Ok(n) => {
                    notes.extend(n.repairs.iter().map(|r| format!("repaired: {r:?}")));
                    return Ok(AgentOutcome::Done(AgentReport {
                        report: n.value,
                        turns: st.turns,
                        tool_calls: st.tool_calls,
                        usage: st.usage,
                        notes,
                    }));
                }
                Err(e) => {
                    self.note(format!(
                        "final answer is not a report ({e}); asking for one"
                    ));
                    notes.push(format!("final answer was not a report: {e}"));
                    st.messages.push(Message::assistant(text.clone()));
                }
            }
        }
        st.messages.push(Message::user(format!(
            "{}Report your result now as the JSON object described in OUTPUT FORMAT (no tool calls).",
            if forced {
                "You have used all your turns. "
            } else {
                ""
            }
        )));
        let request = ChatRequest::new(st.messages.clone());
        match complete_structured::<StageReport>(
            self.provider.as_ref(),
            request,
            StructuredOptions::default(),
            self.cancel.clone(),
        )
        .await
        {
            Ok(answer) => {
                for c in &answer.completions {
                    st.usage.add(&c.usage);
                }
                notes.extend(answer.repairs.iter().map(|r| format!("repaired: {r:?}")));
                Ok(AgentOutcome::Done(AgentReport {
                    report: answer.value,
                    turns: st.turns + answer.completions.len() as u32,
                    tool_calls: st.tool_calls,
                    usage: st.usage,
                    notes,
                }))
            }
            Err(trellis_llm::Error::Budget(exceeded)) => Ok(self.budget_interrupt(st, exceeded)),
            Err(trellis_llm::Error::Cancelled) => Err(Error::Cancelled),
            Err(trellis_llm::Error::Structured(e)) if !text.trim().is_empty() => {
                // The model keeps answering in prose: keep its words as the output rather
                // than losing the work, and say so.
                notes.push(format!("no structured report ({e}); kept the prose answer"));
                Ok(AgentOutcome::Done(AgentReport {
                    report: StageReport {
                        failure: false,
                        output: text,
                        ..StageReport::default()
                    },
                    turns: st.turns,
                    tool_calls: st.tool_calls,
                    usage: st.usage,
                    notes,
                }))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// An explicit grant in an answer: `{"grant": N}` or a bare number.
fn grant_of(answer: &Answer) -> Option<f64> {
    match &answer.0 {
        Value::Number(n) => n.as_f64(),
        Value::Object(m) => m.get("grant").and_then(Value::as_f64),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|g| *g > 0.0)
}
