//! The agent loop: the model answers, the tools it calls run, their results go back, until
//! the model gives its final report or runs out of turns.
//!
//! - Session events: the loop speaks [`SessionEvent`] through a [`SessionSink`] — the prompt
//!   of a fresh activation ([`SessionEvent::PromptSet`]), every model call as a turn
//!   (started, text and thinking deltas, completed with the assistant message, or failed),
//!   every tool call (started, completed with what went back to the model), messages that
//!   arrived while it ran, notes. Turn numbers count per session, across attempts and
//!   resumes ([`AgentRun::first_turn`]). The events are complete enough to rebuild the
//!   conversation ([`Resume::Recorded`]).
//! - Live messages: before every model call the loop drains its [`Inbox`]; what arrived
//!   goes to the model as one user message ([`SessionEvent::MessagesReceived`]).
//! - Tool errors come back to the model as tool results; they never abort the agent.
//! - Interrupts: when a tool needs the user ([`GraphInteraction`]) or a call would exceed a
//!   budget, the loop stops and returns [`AgentOutcome::Interrupted`] with its conversation
//!   as scratch; [`Resume::Interrupt`] with the scratch and the answer continues where it
//!   stopped, without repeating model calls or tool calls that already ran.
//! - Crashes: [`Resume::Recorded`] with the session's recorded events of the activation
//!   continues from the last recorded turn (see `record.rs`).
//! - Context: before every model call the prompt is counted and, above the agent's
//!   threshold or input cap, compacted — earlier messages summarised, what still does not
//!   fit cut ([`SessionEvent::ContextCompacted`]); tool outputs above the limit are stored
//!   behind a handle the model reads back with `read_tool_output` ([`crate::context`]).
//! - The final answer is parsed into a [`StageReport`] with the normaliser; if it cannot be,
//!   one structured call (a turn too) asks for the report (grammar-constrained on the
//!   embedded model).

mod blocks;
mod budget;
mod build;
mod calls;
mod defs;
mod events;
mod foresight;
pub(crate) mod inbox;
mod indent;
mod merge;
mod notes;
mod probe;
mod record;
mod report;
mod repro;
mod sample;
mod speculate;
mod state;
mod stuck;
mod toolset;
mod window;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    BudgetLedger, ChatRequest, Completion, Message, ModelProvider, StreamEvent, ToolCall, ToolSpec,
    Usage, collect_named,
};
use trellis_protocol::{Answer, Interrupt, NodeId, SessionEvent, ToolStatus};
use trellis_tools::dag::call_parallel;
use trellis_tools::{Registry, ToolEnv};

use crate::context::{ContextPolicy, MemoryOutputs};
use crate::error::{Error, Result};
use crate::interaction::GraphInteraction;
use crate::output::StageReport;
use crate::roles::RoleSpec;

use state::{Saved, Waiting};

use events::{Finished, completed, status_of, tool_completed, tool_started, turn_usage};

pub use blocks::grammar::{grammar as block_grammar, shown as shown_lines};
pub use calls::{EXECUTE_DAG, ExecuteDagInput, REPLAN_DAG, execute_dag_spec, replan_dag_spec};
pub use inbox::Inbox;
pub use notes::PathNotes;
pub use probe::{ScriptLanguage, ScriptRun, TestOutcome, TestProbe};
pub use record::INTERRUPTED_TOOL;
pub use toolset::{SEARCH_TOOLS, search_tools_spec};

/// Where one session's events go (an agent activation's, or a retrieval node's notes).
pub type SessionSink = Arc<dyn Fn(SessionEvent) + Send + Sync>;

/// Builds the [`SessionSink`] of a node: the runtime calls it with the node's id once per
/// activation of an agent or retrieval node, and that activation's events go to the sink
/// it returns, in order. A [`SessionEvent`] does not name its node; the sink does, by what
/// it captures: the CLI's printer captures the node to prefix its lines, the runtime service
/// captures the run and routes node `N`'s events to session
/// [`SessionId::for_node(run, N)`](trellis_protocol::SessionId::for_node).
pub type SinkFactory = Arc<dyn Fn(&NodeId) -> SessionSink + Send + Sync>;

/// One activation of an agent.
pub struct AgentRun {
    /// The graph node (for interrupts and notes).
    pub node: String,
    /// The role.
    pub role: RoleSpec,
    /// The model (usually budgeted).
    pub provider: Arc<dyn ModelProvider>,
    /// The tools; the role's name is its allow list in the registry, unless `tool_scope`
    /// names another.
    pub tools: Arc<Registry>,
    /// The registry allow list of this activation when it is not the role's (an agent whose
    /// workflow stage grants it MCP tools).
    pub tool_scope: Option<String>,
    /// The tools' environment (workspace, policy, interaction).
    pub env: ToolEnv,
    /// The interrupt-backed interaction, when `env.interaction` is one.
    pub gate: Option<Arc<GraphInteraction>>,
    /// The run's budget ledger, to grant more budget when the user agrees.
    pub ledger: Option<Arc<BudgetLedger>>,
    /// The system prompt and context messages (ignored when resuming: the scratch or the
    /// recorded prompt is the conversation).
    pub messages: Vec<Message>,
    /// Model turns allowed in this activation.
    pub max_turns: u32,
    /// The session's events.
    pub events: Option<SessionSink>,
    /// Messages that arrive while the agent runs (a node handler passes `ctx.mailbox`).
    pub inbox: Option<Box<dyn Inbox>>,
    /// The session's turn number of the next model call: 1 for a new session, else one
    /// more than the last turn the session recorded. A resumed activation continues from
    /// its scratch or record when that is further.
    pub first_turn: u32,
    /// The node's activation number (in [`SessionEvent::PromptSet`] and
    /// [`SessionEvent::TurnStarted`]).
    pub attempt: u32,
    /// Answer in free text (a conversation) instead of a typed stage report: the final
    /// answer is the report's `output` as it is.
    pub free_text: bool,
    /// How the prompt is kept within the agent's input cap and the model's window
    /// (summary model, thresholds, where large tool outputs are stored).
    pub context: ContextPolicy,
    /// Stops the agent.
    pub cancel: CancellationToken,
    /// The project's tests, for a role that tests its drawn answers (`test_samples`).
    pub probe: Option<Arc<dyn TestProbe>>,
}

/// How an activation starts.
#[derive(Clone, Debug, Default)]
pub enum Resume {
    /// A new activation: the prompt is [`AgentRun::messages`].
    #[default]
    Fresh,
    /// The node runs again because its interrupt was answered: continue from the scratch
    /// saved with the interrupt.
    Interrupt {
        /// What [`AgentOutcome::Interrupted`] saved.
        scratch: Value,
        /// The user's answer.
        answer: Answer,
    },
    /// The process stopped while the activation ran and the engine runs the node again:
    /// rebuild the conversation from the session's recorded events of this attempt (from
    /// its `PromptSet` on; earlier events are skipped). Completed model calls and tool
    /// calls are not repeated; a tool call that started and never completed is reported
    /// to the model as interrupted ([`INTERRUPTED_TOOL`]). Without a `PromptSet` of
    /// [`AgentRun::attempt`] this is [`Resume::Fresh`].
    Recorded(Vec<SessionEvent>),
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

impl AgentRun {
    /// Sends `event` to the sink, counting it unless it is a delta.
    fn emit(&self, st: &mut Saved, event: SessionEvent) {
        if !event.is_delta() {
            st.recorded += 1;
        }
        self.send(event);
    }

    fn send(&self, event: SessionEvent) {
        if let Some(sink) = &self.events {
            sink(event);
        }
    }

    /// Where call `call_id`'s progress goes: `ToolProgress` events of the session (deltas,
    /// not steps of the conversation: a resumed activation does not count them).
    fn progress_of(&self, turn: u32, call_id: &str) -> Option<trellis_tools::ProgressFn> {
        let sink = self.events.clone()?;
        let call_id = call_id.to_owned();
        Some(Arc::new(move |p: trellis_tools::ToolProgress| {
            sink(SessionEvent::ToolProgress {
                turn,
                call_id: call_id.clone(),
                progress: p.progress,
                total: p.total,
                message: p.message,
            });
        }))
    }

    fn note(&self, st: &mut Saved, text: impl Into<String>) {
        self.emit(st, SessionEvent::Note { text: text.into() });
    }

    /// The registry allow list this activation's tools come from.
    fn allow_list(&self) -> &str {
        self.tool_scope.as_deref().unwrap_or(&self.role.name)
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools
            .specs_for(self.allow_list())
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                parameters: t.input_schema,
            })
            .collect()
    }

    /// Runs the agent: a fresh activation, the continuation of an answered interrupt, or the
    /// continuation of a recorded activation after the process stopped.
    pub async fn run(mut self, resume: Resume) -> Result<AgentOutcome> {
        // A remote model's window is asked of its server once: from here on the limits
        // (`info().context_window`) are the server's, not an assumption.
        self.provider.context_window().await;
        let mut inbox = self.inbox.take();
        if self.context.outputs.is_none() {
            self.context.outputs = Some(Arc::new(MemoryOutputs::default()));
        }
        let mut st = match self.restore(resume).await? {
            ControlFlow::Continue(st) => st,
            ControlFlow::Break(out) => return Ok(out),
        };
        while st.turns < self.max_turns {
            if let Some(why) = self.stuck(&mut st) {
                return self.finish(st, String::new(), Some(why)).await;
            }
            let next = st.next_turn;
            self.deliver(&mut st, next, inbox::drain(&mut inbox));
            let tools = self.offered_tools(&st);
            let request = ChatRequest {
                grammar: self.block_grammar(&st, &tools),
                tools,
                final_format: self.final_format(),
                tool_choice: self.tool_choice(&st),
                ..ChatRequest::new(st.messages.clone())
            };
            let redraw = std::mem::take(&mut st.redraw);
            let (request, turn) = self.open_turn(&mut st, request, 0).await?;
            let request = if redraw {
                self.redrawn(request, turn)
            } else {
                request
            };
            let again = self.samples().then(|| request.clone());
            // Safe predicted calls run while the model thinks: ready when it asks.
            let (completion, ()) =
                tokio::join!(self.turn(request, turn, true), self.speculate(&mut st));
            let completion = match (completion, again) {
                (Ok(c), Some(request)) => Ok(self.sample(&mut st, request, c, turn).await?),
                (c, _) => c,
            };
            let mut completion = match completion {
                Ok(c) => c,
                Err(e) => return self.turn_failed(st, turn, e),
            };
            st.turns += 1;
            st.usage.add(&completion.usage);
            let written = self.take_blocks(&st, &mut completion, turn);
            let message = completion.to_message();
            self.emit(
                &mut st,
                SessionEvent::TurnCompleted {
                    turn,
                    message: serde_json::to_value(&message).unwrap_or(Value::Null),
                    usage: turn_usage(&completion.usage),
                },
            );
            if completion.tool_calls.is_empty() {
                let unapplied = written.as_ref().and_then(|w| self.blocks_outcome(&st, w));
                // Blocks that apply became tool calls: here every block was refused.
                if let Some(tell) = unapplied.filter(|_| st.turns < self.max_turns) {
                    if !self.redraw(&mut st) {
                        st.messages.extend([message, tell]);
                    }
                    continue;
                }
                // Messages that arrived during the final answer: let the model act on them
                // while it has turns left.
                if st.turns < self.max_turns {
                    let lines = inbox::drain(&mut inbox);
                    if !lines.is_empty() {
                        st.messages.push(message);
                        let next = st.next_turn;
                        self.deliver(&mut st, next, lines);
                        continue;
                    }
                }
                if self.role.changes_files
                    && st.turns < self.max_turns
                    && stuck::unbacked_success(&st.messages, &completion.text, |t| {
                        self.tools.read_only(t)
                    })
                {
                    if self.redraw(&mut st) {
                        continue;
                    }
                    self.note(
                        &mut st,
                        "reported success without changing a file; asked to make the change \
                         or say why none is needed",
                    );
                    st.messages.push(message);
                    st.messages.push(Message::user(stuck::question(&self.role)));
                    continue;
                }
                return self.finish(st, completion.text, None).await;
            }
            st.messages.push(message);
            if let Some(out) = self
                .execute(&mut st, completion.tool_calls, 0, turn, BTreeMap::new())
                .await?
            {
                return Ok(out);
            }
            if let Some(w) = written {
                match self.blocks_outcome(&st, &w) {
                    Some(tell) => st.messages.push(tell),
                    None => return Ok(self.edited(st, &w)),
                }
            }
        }
        self.note(
            &mut st,
            format!(
                "turn limit ({}) reached; asking for the report",
                self.max_turns
            ),
        );
        self.finish(st, String::new(), Some("You have used all your turns. "))
            .await
    }

    /// The state the loop starts from, or the outcome when resuming already ends the
    /// activation (a final answer recorded, an interrupt again, a refused budget).
    async fn restore(&self, resume: Resume) -> Result<ControlFlow<AgentOutcome, Saved>> {
        let st = match resume {
            Resume::Fresh => self.start().await,
            Resume::Interrupt { scratch, answer } => {
                let mut st: Saved =
                    serde_json::from_value(scratch).map_err(|e| Error::Resume(e.to_string()))?;
                st.next_turn = st.next_turn.max(self.first_turn).max(1);
                match std::mem::take(&mut st.waiting) {
                    Waiting::Tools {
                        calls,
                        next,
                        turn,
                        done,
                    } => {
                        if let Some(gate) = &self.gate {
                            gate.preset(answer);
                        }
                        let done = done.into_iter().collect();
                        if let Some(out) = self.execute(&mut st, calls, next, turn, done).await? {
                            return Ok(ControlFlow::Break(out));
                        }
                    }
                    Waiting::Budget { exceeded } => {
                        if !answer.is_approval() && budget::grant_of(&answer).is_none() {
                            let report = self.budget_refused(&st, &exceeded);
                            return Ok(ControlFlow::Break(AgentOutcome::Done(report)));
                        }
                        self.grant(&mut st, &exceeded, &answer);
                    }
                    Waiting::Nothing => {}
                }
                st
            }
            Resume::Recorded(events) => {
                let Some(r) = record::replay(&events, self.attempt, self.first_turn)? else {
                    return Ok(ControlFlow::Continue(self.start().await));
                };
                let mut st = r.state;
                for (turn, call_id, name) in r.interrupted {
                    // A plan with a checkpoint can be continued instead of redone.
                    let output = self
                        .interrupted_plan(&name, &call_id)
                        .unwrap_or_else(|| INTERRUPTED_TOOL.into());
                    if output != INTERRUPTED_TOOL {
                        for m in st.messages.iter_mut().rev() {
                            if m.tool_call_id.as_deref() == Some(call_id.as_str()) {
                                m.content.clone_from(&output);
                                break;
                            }
                        }
                    }
                    self.emit(
                        &mut st,
                        SessionEvent::ToolCompleted {
                            turn,
                            call_id,
                            name,
                            output,
                            status: ToolStatus::Interrupted,
                            duration_ms: 0,
                        },
                    );
                }
                match r.next {
                    record::Next::Finish { text } => {
                        return Ok(ControlFlow::Break(self.finish(st, text, None).await?));
                    }
                    record::Next::Tools { turn, calls } => {
                        if let Some(out) = self
                            .execute(&mut st, calls, 0, turn, BTreeMap::new())
                            .await?
                        {
                            return Ok(ControlFlow::Break(out));
                        }
                    }
                    record::Next::Model => {}
                }
                st
            }
        };
        Ok(ControlFlow::Continue(st))
    }

    /// The state of a fresh activation, its prompt (with what foresight adds) recorded.
    async fn start(&self) -> Saved {
        let foresight = self.foresee(&self.messages).await;
        let mut prompt = self.messages.clone();
        if let Some(text) = foresight.message {
            prompt.push(Message::user(text));
        }
        let focus = self.focus(&prompt).await;
        if let Some(text) = focus.message {
            prompt.push(Message::user(text));
        }
        let messages = prompt
            .iter()
            .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
            .collect();
        let mut st = Saved {
            messages: prompt,
            next_turn: self.first_turn.max(1),
            foresight: foresight.history.len(),
            history: foresight.history,
            speculated: foresight.speculated,
            usage: focus.usage,
            ..Saved::default()
        };
        self.emit(
            &mut st,
            SessionEvent::PromptSet {
                attempt: self.attempt,
                messages,
            },
        );
        for note in foresight.notes.into_iter().chain(focus.note) {
            self.note(&mut st, note);
        }
        st
    }

    /// Appends messages that arrived (`lines`, if any) as one user message, first seen by
    /// model call `turn`.
    fn deliver(&self, st: &mut Saved, turn: u32, lines: Vec<String>) {
        if lines.is_empty() {
            return;
        }
        st.messages
            .push(Message::user(inbox::received_text(&lines)));
        self.emit(st, SessionEvent::MessagesReceived { turn, texts: lines });
    }

    /// One streamed model call; the call's progress, and when `live` its text and thinking,
    /// are reported as they arrive (a drawn sample beside the answer that was streamed is not
    /// `live`).
    async fn turn(
        &self,
        request: ChatRequest,
        turn: u32,
        live: bool,
    ) -> trellis_llm::Result<Completion> {
        let stream = self.provider.stream(request, self.cancel.clone());
        collect_named(&self.provider.info().profile, stream, |event| match event {
            StreamEvent::TextDelta { text } if live => self.send(SessionEvent::MessageDelta {
                turn,
                text: text.clone(),
            }),
            StreamEvent::ThinkingDelta { text } if live => self.send(SessionEvent::ThoughtDelta {
                turn,
                text: text.clone(),
            }),
            StreamEvent::Progress {
                prompt_tokens,
                prompt_done,
                generated,
            } => self.send(SessionEvent::TurnProgress {
                turn,
                prompt_tokens: *prompt_tokens,
                prompt_done: *prompt_done,
                generated: *generated,
            }),
            _ => {}
        })
        .await
    }

    /// Runs `calls[next..]` (asked for by turn `turn`), appending their results in the
    /// order the model asked; returns an interrupt if one waits for the user. `done` holds
    /// results of calls that already ran beside others (kept in the interrupt's scratch).
    async fn execute(
        &self,
        st: &mut Saved,
        calls: Vec<ToolCall>,
        next: usize,
        turn: u32,
        mut done: BTreeMap<usize, Finished>,
    ) -> Result<Option<AgentOutcome>> {
        for run in self.segments(&calls, next) {
            let todo: Vec<usize> = run.clone().filter(|i| !done.contains_key(i)).collect();
            let mut started = BTreeSet::new();
            if todo.len() > 1 {
                if self.cancel.is_cancelled() {
                    return Err(Error::Cancelled);
                }
                for &i in &todo {
                    self.emit(st, tool_started(turn, &calls[i]));
                    started.insert(i);
                }
                let batch = todo
                    .iter()
                    .map(|&i| {
                        let args = calls[i].arguments_json().unwrap_or(Value::Null);
                        (calls[i].name.clone(), args)
                    })
                    .collect();
                let results = call_parallel(
                    &self.tools,
                    &self.env,
                    self.allow_list(),
                    batch,
                    self.cancel.clone(),
                    false,
                )
                .await;
                for (&i, r) in todo.iter().zip(results) {
                    if r.deferred {
                        continue;
                    }
                    let status = status_of(&r.result);
                    let data = r.result.data.clone().filter(|_| !r.result.is_error);
                    let content = if r.result.is_error && !r.result.cancelled {
                        format!("error: {}", r.result.content)
                    } else {
                        r.result.content
                    };
                    done.insert(
                        i,
                        Finished {
                            content,
                            status,
                            duration_ms: r.duration_ms,
                            data,
                        },
                    );
                }
            }
            for i in run {
                let call = &calls[i];
                if let Some(f) = done.remove(&i) {
                    if f.status == ToolStatus::Cancelled {
                        self.emit(
                            st,
                            completed(turn, call, f.content, f.status, f.duration_ms),
                        );
                        return Err(Error::Cancelled);
                    }
                    if let Ok(args) = call.arguments_json() {
                        self.remember(st, &call.name, args, f.data);
                    }
                    let content = self.shrink_output(st, turn, call, f.content);
                    let content = if f.status == ToolStatus::Ok {
                        self.with_path_notes(st, call, content)
                    } else {
                        content
                    };
                    self.emit(
                        st,
                        completed(turn, call, content.clone(), f.status, f.duration_ms),
                    );
                    st.tool_calls += 1;
                    st.messages
                        .push(Message::tool_result(call.id.clone(), content));
                    continue;
                }
                if let Some(out) = self
                    .call_one(st, &calls, i, turn, started.contains(&i), &done)
                    .await?
                {
                    return Ok(Some(out));
                }
            }
        }
        Ok(None)
    }

    /// The interrupt for the user's answer a call of `calls[i]` is waiting for, if the gate
    /// holds one: the call runs again (a new `ToolStarted`) once the user answered.
    fn wait_for_user(
        &self,
        st: &mut Saved,
        calls: &[ToolCall],
        i: usize,
        turn: u32,
        done: &BTreeMap<usize, Finished>,
    ) -> Result<Option<AgentOutcome>> {
        let Some(pending) = self.gate.as_ref().and_then(|g| g.take_pending()) else {
            return Ok(None);
        };
        let interrupt = pending.interrupt(&self.node);
        st.waiting = Waiting::Tools {
            calls: calls.to_vec(),
            next: i,
            turn,
            done: done.iter().map(|(i, f)| (*i, f.clone())).collect(),
        };
        let scratch = serde_json::to_value(&*st).map_err(|e| Error::Resume(e.to_string()))?;
        st.waiting = Waiting::Nothing;
        Ok(Some(AgentOutcome::Interrupted { interrupt, scratch }))
    }

    /// Runs call `i` of `calls` on its own (its `ToolStarted` already sent when `started`),
    /// appending its result; returns an interrupt if it waits for the user.
    async fn call_one(
        &self,
        st: &mut Saved,
        calls: &[ToolCall],
        i: usize,
        turn: u32,
        started: bool,
        done: &BTreeMap<usize, Finished>,
    ) -> Result<Option<AgentOutcome>> {
        let call = &calls[i];
        if self.cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        let args = call.arguments_json();
        if !started {
            self.emit(st, tool_started(turn, call));
        }
        let clock = Instant::now();
        // A call run ahead of the model (speculation) is answered from its result.
        let ready = match &args {
            Ok(a) => self.take_speculated(st, &call.name, a),
            Err(_) => None,
        };
        // The call's structured result, when it has one (later arguments may come from it).
        let mut data = None;
        let (content, status) = match (ready, args) {
            (Some((content, status, kept)), _) => {
                data = kept;
                (content, status)
            }
            (None, Err(e)) => (
                format!(
                    "error: the arguments of `{}` are not valid JSON ({e}); call it again with a JSON object",
                    call.name
                ),
                ToolStatus::Error,
            ),
            (None, Ok(args)) if self.reads_output(&call.name) => self.read_output(&args),
            (None, Ok(args))
                if call.name == SEARCH_TOOLS
                    && !self.tools.allows(self.allow_list(), SEARCH_TOOLS) =>
            {
                self.search_tools(st, &args)
            }
            (None, Ok(args))
                if (call.name == EXECUTE_DAG || call.name == REPLAN_DAG)
                    && self.env.config.dag.execute_dag =>
            {
                let (text, status) = self.execute_dag(call, &args).await;
                if status == ToolStatus::Cancelled {
                    self.emit(st, tool_completed(turn, call, text, status, clock));
                    return Err(Error::Cancelled);
                }
                if let Some(out) = self.wait_for_user(st, calls, i, turn, done)? {
                    return Ok(Some(out));
                }
                (text, status)
            }
            (None, Ok(args)) => {
                let result = self
                    .tools
                    .call_with_progress(
                        &self.env,
                        self.allow_list(),
                        &call.name,
                        args,
                        self.cancel.clone(),
                        self.progress_of(turn, &call.id),
                    )
                    .await;
                let status = status_of(&result);
                if result.cancelled {
                    self.emit(
                        st,
                        tool_completed(turn, call, result.content, status, clock),
                    );
                    return Err(Error::Cancelled);
                }
                if let Some(out) = self.wait_for_user(st, calls, i, turn, done)? {
                    return Ok(Some(out));
                }
                if result.is_error {
                    (format!("error: {}", result.content), status)
                } else {
                    data = result.data;
                    (result.content, status)
                }
            }
        };
        if let Ok(args) = call.arguments_json() {
            self.remember(st, &call.name, args, data);
        }
        let content = self.shrink_output(st, turn, call, content);
        let content = if status == ToolStatus::Ok {
            self.with_path_notes(st, call, content)
        } else {
            content
        };
        self.emit(
            st,
            tool_completed(turn, call, content.clone(), status, clock),
        );
        st.tool_calls += 1;
        st.messages
            .push(Message::tool_result(call.id.clone(), content));
        Ok(None)
    }
}
