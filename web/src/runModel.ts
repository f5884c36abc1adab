// One run's live state: the graph snapshot (`GET …/graph`, which says up to which seq it is)
// plus every later event of the `run:<id>` stream applied in order. Views subscribe to the
// model's notifier and re-render at most once per frame.

import { get, enc } from './api';
import type { Frame, GraphNode, GraphResponse, Interrupt, NodeState, RunRecord, RunStatus, Routing } from './api';
import { Notifier } from './store';
import { fetchStream, socket } from './ws';
import type { Follow } from './ws';
import { toast } from './ui';

export interface NodeInfo {
  id: string;
  attempt: number;
  state: NodeState | null;
  parent: string | null;
  error: string | null;
  interrupt: Interrupt | null;
  /** Activations after the first (retries, loops, revisions). */
  branches: number;
  /** The last handler result (`graph:node_output`). */
  result?: any;
  /** Messages queued for / delivered to the node's agent. */
  messages: { id: number; delivered: boolean; attempt: number }[];
  /** When the state last changed (ms). */
  since?: number;
  order: number;
}

export interface LogEntry {
  seq: number;
  ts: number;
  name: string;
  text: string;
}

const MAX_LOG = 2000;

export class RunModel extends Notifier {
  record: RunRecord | null = null;
  status: RunStatus = 'running';
  error: string | null = null;
  workflow: string | null = null;
  entry: string | null = null;
  routing: Routing[] = [];
  skipped: { stage?: string; name?: string; reason?: string }[] = [];
  counters: Record<string, number> = {};
  nodes = new Map<string, NodeInfo>();
  /** Children of fan-out parents, in order of creation. */
  children = new Map<string, string[]>();
  /** Edges taken (from `graph:routed`) and added (`graph:edge_added`), "from→to". */
  taken = new Set<string>();
  added: { from: string; to: string }[] = [];
  /** The stage running now (the last top-level node that started running). */
  stage: string | null = null;
  lastSeq = 0;
  log: LogEntry[] = [];
  loaded = false;
  loadError: string | null = null;
  /** Bumped when nodes or edges are added (the layout depends on it). */
  structure = 0;
  /** Bumped when something waits for an answer changed (approvals reload). */
  interruptsVersion = 0;
  private follow: Follow | null = null;
  private order = 0;

  constructor(public readonly id: string) {
    super();
  }

  /** The run's graph snapshot and record, applied. */
  private async snapshot(): Promise<GraphResponse> {
    const [graph, record] = await Promise.all([
      get<GraphResponse>(`/api/workflows/${enc(this.id)}/graph`),
      get<RunRecord>(`/api/workflows/${enc(this.id)}`),
    ]);
    this.record = record;
    this.applySnapshot(graph);
    return graph;
  }

  async load(): Promise<void> {
    try {
      const graph = await this.snapshot();
      // The run's history up to the snapshot: node results, branch counts, the log.
      const history = await fetchStream(`run:${graph.run}`, 0, graph.lastSeq);
      for (const f of history) this.applyHistory(f);
      this.lastSeq = graph.lastSeq;
      this.loaded = true;
      this.notify();
      this.follow = socket.follow(`run:${graph.run}`, graph.lastSeq, (f) => this.apply(f));
    } catch (e) {
      this.loadError = (e as Error).message;
      this.loaded = true;
      this.notify();
      throw e;
    }
  }

  close() {
    this.follow?.close();
    this.follow = null;
  }

  /** Reads the graph snapshot again: the run continued with another graph (its planning node
   * decided the workflow, whose stages and routing the snapshot now has). */
  private async refresh(): Promise<void> {
    try {
      await this.snapshot();
      this.notify();
    } catch (e) {
      toast(`Reading the run's workflow failed: ${(e as Error).message}`, 'error');
    }
  }

  private applySnapshot(g: GraphResponse) {
    this.status = g.status;
    this.workflow = g.workflow;
    this.entry = g.entry;
    this.routing = g.routing ?? [];
    this.skipped = g.skipped ?? [];
    this.counters = g.counters ?? {};
    for (const n of g.nodes) this.upsert(n);
    for (const w of g.waiting) {
      const n = this.nodes.get(w.node);
      if (n) n.interrupt = w.interrupt;
    }
    for (const s of this.skipped) {
      const id = s.stage ?? s.name;
      if (id && !this.nodes.has(id)) this.upsert({ id, attempt: 0, state: 'SKIPPED', parent: null, error: null, interrupt: null });
    }
    const running = [...this.nodes.values()].filter((n) => !n.parent && n.state === 'RUNNING');
    if (running.length) this.stage = running[running.length - 1].id;
    this.structure++;
  }

  private upsert(n: GraphNode) {
    const cur = this.nodes.get(n.id);
    if (cur) {
      Object.assign(cur, { attempt: n.attempt, state: n.state, parent: n.parent ?? cur.parent, error: n.error, interrupt: n.interrupt });
      return cur;
    }
    const info: NodeInfo = { ...n, branches: Math.max(0, n.attempt - 1), messages: [], order: this.order++ };
    this.nodes.set(n.id, info);
    if (n.parent) this.addChild(n.parent, n.id);
    return info;
  }

  private addChild(parent: string, id: string) {
    const list = this.children.get(parent) ?? [];
    if (!list.includes(id)) list.push(id);
    this.children.set(parent, list);
  }

  private ensure(id: string, parent?: string | null): NodeInfo {
    let n = this.nodes.get(id);
    if (!n) {
      n = this.upsert({ id, attempt: 0, state: null, parent: parent ?? null, error: null, interrupt: null });
      this.structure++;
    } else if (parent && !n.parent) {
      n.parent = parent;
      this.addChild(parent, id);
      this.structure++;
    }
    return n;
  }

  /** An event at or before the snapshot: only what the snapshot lacks. */
  private applyHistory(f: Frame) {
    const e = f.event;
    this.pushLog(f);
    switch (e.type) {
      case 'nodeOutput': {
        const n = this.nodes.get(e.node);
        if (n) n.result = e.result ?? (e.error ? { error: e.error } : n.result);
        break;
      }
      case 'routed':
        for (const to of e.to ?? []) this.taken.add(`${e.from}→${to}`);
        break;
      case 'edgeAdded':
        this.added.push({ from: e.edge.from, to: e.edge.to });
        this.structure++;
        break;
      case 'messageQueued': {
        const n = this.nodes.get(e.node);
        if (n) n.messages.push({ id: e.id, delivered: e.delivered, attempt: e.attempt });
        break;
      }
      case 'nodeTransition':
        if (f.name === 'graph:node_status_changed' && e.to === 'RUNNING') {
          const n = this.nodes.get(e.node);
          if (n && !n.parent) this.stage = e.node;
        }
        break;
    }
  }

  /** A live event after the snapshot. */
  apply(f: Frame) {
    if (f.seq <= this.lastSeq) return;
    this.lastSeq = f.seq;
    const e = f.event;
    this.pushLog(f);
    switch (e.type) {
      case 'nodeAdded':
        this.ensure(e.node, e.parent);
        break;
      case 'nodeTransition': {
        const n = this.ensure(e.node);
        if (e.attempt > n.attempt && n.attempt > 0) n.branches += e.attempt - n.attempt;
        n.attempt = Math.max(n.attempt, e.attempt);
        n.state = e.to;
        n.since = f.ts;
        if (e.to !== 'WAITING_INPUT' && n.interrupt) {
          n.interrupt = null;
          this.interruptsVersion++;
        }
        if (e.to === 'RUNNING' || e.to === 'READY') n.error = null;
        if (e.to === 'FAILED' && e.reason) n.error = e.reason;
        if (e.to === 'RUNNING' && !n.parent) this.stage = e.node;
        break;
      }
      case 'nodeOutput': {
        const n = this.ensure(e.node);
        n.result = e.result ?? n.result;
        if (e.error) n.error = e.error;
        break;
      }
      case 'interruptRaised': {
        const n = this.ensure(e.node);
        n.interrupt = e.interrupt;
        this.interruptsVersion++;
        break;
      }
      case 'inputReceived': {
        const n = this.ensure(e.node);
        n.interrupt = null;
        this.interruptsVersion++;
        break;
      }
      case 'routed':
        for (const to of e.to ?? []) {
          const key = `${e.from}→${to}`;
          if (!this.taken.has(key)) {
            this.taken.add(key);
            this.structure++;
          }
        }
        break;
      case 'edgeAdded':
        this.added.push({ from: e.edge.from, to: e.edge.to });
        this.structure++;
        break;
      case 'runStatusChanged':
        this.status = e.status;
        this.error = e.error ?? null;
        if (this.record) this.record = { ...this.record, status: e.status, updatedTs: f.ts, live: e.status === 'running' };
        this.interruptsVersion++;
        break;
      case 'runContinued':
        void this.refresh();
        break;
      case 'runResumed':
        // A server drives the run again (an answer, a message or `resume`): it is live. A run
        // that waited also gets a runStatusChanged(running); one that a killed server left
        // "running" gets only this.
        if (this.record) this.record = { ...this.record, status: this.record.status === 'waitingInput' ? 'running' : this.record.status, updatedTs: f.ts, live: true };
        if (this.status === 'waitingInput') {
          this.status = 'running';
          this.interruptsVersion++;
        }
        break;
      case 'commandRefused':
        toast(`A command was refused: ${e.reason}`, 'error');
        break;
      case 'messageQueued': {
        const n = this.ensure(e.node);
        n.messages.push({ id: e.id, delivered: e.delivered, attempt: e.attempt });
        break;
      }
      case 'stepCompleted':
        if (this.record) this.record = { ...this.record, step: e.step, updatedTs: f.ts };
        break;
    }
    this.notify();
  }

  private pushLog(f: Frame) {
    this.log.push({ seq: f.seq, ts: f.ts, name: f.name, text: describe(f) });
    if (this.log.length > MAX_LOG) this.log.splice(0, this.log.length - MAX_LOG);
  }

  topLevel(): NodeInfo[] {
    return [...this.nodes.values()].filter((n) => !n.parent).sort((a, b) => a.order - b.order);
  }

  /** Counts per state of a fan-out parent's children. */
  groupCounts(parent: string): Record<string, number> {
    const out: Record<string, number> = {};
    for (const id of this.children.get(parent) ?? []) {
      const s = this.nodes.get(id)?.state ?? 'PENDING';
      out[s] = (out[s] ?? 0) + 1;
    }
    return out;
  }

  /** Nodes under `id` (fan-out children, recursively). */
  descendants(id: string): string[] {
    const out: string[] = [];
    const stack = [...(this.children.get(id) ?? [])];
    while (stack.length) {
      const c = stack.pop()!;
      out.push(c);
      stack.push(...(this.children.get(c) ?? []));
    }
    return out;
  }

  isFinished(): boolean {
    return this.status === 'succeeded' || this.status === 'failed' || this.status === 'cancelled';
  }
}

/** Why `node` cannot be pruned now, or null when it can (only READY, RUNNING, WAITING_INPUT). */
/**
 * Why a node cannot be sent back for a revision now (null when it can): the service re-runs a
 * finished run's COMPLETED or FAILED stage with the feedback; a running run takes messages.
 */
export function reviseBlocked(m: RunModel, n: NodeInfo): string | null {
  if (n.id === 'DONE' || n.id === 'ABORT') return 'an end node has no work to revise';
  if (!m.isFinished()) return 'the run is still going: send the agent a message instead';
  if (n.state !== 'COMPLETED' && n.state !== 'FAILED') return `a ${n.state ?? 'never reached'} node has no work to revise`;
  return null;
}

export function pruneBlocked(m: RunModel, n: NodeInfo): string | null {
  if (m.isFinished()) return `the run has ${m.status === 'succeeded' ? 'succeeded' : m.status}; nothing in it can be pruned`;
  switch (n.state) {
    case 'READY':
    case 'RUNNING':
    case 'WAITING_INPUT':
      return null;
    case null:
      return 'the node has not been reached yet';
    case 'COMPLETED':
    case 'FAILED':
      return `a ${n.state} node is finished work and cannot be pruned`;
    case 'PRUNED':
      return 'the node is already pruned';
    case 'SKIPPED':
      return 'a SKIPPED node never runs';
    default:
      return `state ${n.state} cannot be pruned`;
  }
}

export function describe(f: Frame): string {
  const e = f.event ?? {};
  switch (e.type) {
    case 'nodeTransition':
      return `${e.node}#${e.attempt} ${e.from ? e.from + ' → ' : ''}${e.to}${e.reason ? ` (${e.reason})` : ''}`;
    case 'nodeAdded':
      return `${e.node} added${e.parent ? ` under ${e.parent}` : ''}`;
    case 'nodeOutput':
      return `${e.node}#${e.attempt} output${e.error ? `: error ${e.error}` : e.failure ? ': failure' : ''}`;
    case 'routed':
      return `${e.from} → ${(e.to ?? []).join(', ') || '(end)'} (${e.reason})`;
    case 'interruptRaised':
      return `${e.node} waits: ${e.interrupt?.kind}: ${e.interrupt?.prompt}`;
    case 'inputReceived':
      return `${e.node} answered`;
    case 'stepStarted':
    case 'stepCompleted':
      return `step ${e.step}${e.changed ? ` (${e.changed.join(', ')})` : ''}`;
    case 'runStatusChanged':
      return `run ${e.status}${e.error ? `: ${e.error}` : ''}${e.terminal ? ` at ${e.terminal}` : ''}`;
    case 'commandReceived':
      return `command ${e.command?.type}${e.command?.node ? ` on ${e.command.node}` : ''}`;
    case 'commandRefused':
      return `command refused: ${e.reason}`;
    case 'messageQueued':
      return `message ${e.delivered ? 'delivered to' : 'buffered for'} ${e.node}`;
    case 'runStarted':
      return `run started (${e.graph})`;
    case 'runContinued':
      return `run continued with ${e.graph}`;
    case 'runResumed':
      return `run resumed${e.requeued?.length ? ` (${e.requeued.length} requeued)` : ''}`;
    case 'edgeAdded':
      return `edge ${e.edge?.from} → ${e.edge?.to}`;
    default:
      return e.type ?? '';
  }
}
