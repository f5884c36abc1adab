// The HTTP API of `trellis serve` (docs/api.md): same-origin requests authenticated by the
// HttpOnly cookie that `GET /login?token=…` set. Every refusal is JSON
// `{error, kind, field?}` and becomes an `ApiError` that callers show.

import { signal } from './store';

export class ApiError extends Error {
  constructor(
    public status: number,
    public kind: string,
    message: string,
    public field?: string,
  ) {
    super(message);
  }
}

/** False once the server answered 401: the app shows the login screen. */
export const authorized = signal<boolean | null>(null);

export async function api<T = any>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: method === 'POST' ? { accept: 'application/json', 'content-type': 'application/json' } : { accept: 'application/json' },
      body: method === 'POST' ? JSON.stringify(body ?? {}) : undefined,
    });
  } catch (e) {
    throw new ApiError(0, 'network', `the server cannot be reached (${(e as Error).message}); is \`trellis serve\` running?`);
  }
  const text = await res.text();
  let data: any;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (res.status === 401) {
    authorized.value = false;
  } else if (res.ok && authorized.value !== true) {
    authorized.value = true;
  }
  if (!res.ok) {
    const msg = data?.error ?? `${res.status} ${res.statusText}${text && !data ? `: ${text.slice(0, 200)}` : ''}`;
    throw new ApiError(res.status, data?.kind ?? 'http', msg, data?.field);
  }
  return data as T;
}

export const get = <T = any>(path: string) => api<T>('GET', path);
export const post = <T = any>(path: string, body: unknown = {}) => api<T>('POST', path, body);

export const enc = encodeURIComponent;

export function qs(params: Record<string, string | number | undefined | null>): string {
  const p = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '');
  return p.length ? '?' + p.map(([k, v]) => `${enc(k)}=${enc(String(v))}`).join('&') : '';
}

// ---- types (what the server sends; fields the UI does not use are left out) ----

export type NodeState = 'READY' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'WAITING_INPUT' | 'PRUNED' | 'SKIPPED';
export type RunStatus = 'running' | 'waitingInput' | 'succeeded' | 'failed' | 'cancelled';

export interface Usage {
  calls: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  costUsd: number | null;
  estimatedCalls?: number;
  unfinishedCalls?: number;
}

export interface RunUsage {
  run: Usage;
  agents: [string, Usage][];
  stages: [string, Usage][];
  nodes?: [string, Usage][];
}

export interface RunRecord {
  id: string;
  graph: string;
  status: RunStatus;
  step: number;
  lastSeq: number;
  createdTs: number;
  updatedTs: number;
  terminal: string | null;
  error: string | null;
  workspace: string;
  live: boolean;
  usage: RunUsage;
  workflow?: string;
  request?: string;
}

export interface Interrupt {
  kind: 'question' | 'approval' | 'review';
  prompt: string;
  data?: any;
}

export interface GraphNode {
  id: string;
  attempt: number;
  state: NodeState | null;
  parent: string | null;
  error: string | null;
  interrupt: Interrupt | null;
}

export interface Routing {
  stage: string;
  next_on_success: string;
  next_on_failure: string;
  max_attempts?: number | null;
  failure_aggregation?: string;
}

export interface GraphResponse {
  run: string;
  status: RunStatus;
  steps: number;
  lastSeq: number;
  counters: Record<string, number>;
  nodes: GraphNode[];
  groups: { parent: string; nodes: string[]; counts: Record<string, number> }[];
  waiting: { node: string; interrupt: Interrupt }[];
  workflow: string | null;
  entry: string | null;
  routing: Routing[] | null;
  skipped: { stage?: string; name?: string; reason?: string }[] | null;
  /** The task tree, for task_tree runs (docs/workflows.md). */
  taskTree?: TaskTree | null;
}

export type TaskStatus = 'PENDING' | 'READY' | 'IN_PROGRESS' | 'COMPLETE' | 'FAILED' | 'BLOCKED' | 'DEFERRED';

export interface TreeTask {
  id: string;
  description: string;
  measurable_outcome?: string;
  milestone: string;
  depends_on?: string[];
  status: TaskStatus;
  attempts?: Record<string, number>;
  result_summary?: string | null;
  qa_feedback?: string | null;
  last_failure_reason?: string | null;
  last_failure_stage?: string | null;
}

export interface TaskTree {
  remit: string;
  milestones: { id: string; description: string; status: 'PENDING' | 'ACTIVE' | 'COMPLETE' }[];
  active_milestone?: string | null;
  tasks: Record<string, TreeTask>;
  order: string[];
  current_task?: string | null;
}

export interface Frame {
  type: 'event';
  name: string;
  workspace: string;
  stream: string;
  seq: number;
  ts: number;
  submission?: string;
  event: any;
}

export interface ToolCall {
  callId: string;
  name: string;
  input: any;
  output?: string;
  status?: string;
  durationMs?: number;
  /** The latest `toolProgress` report while the call runs (not stored with the turn). */
  progress?: ToolProgress;
}

/** How far a running tool call has got (an MCP server's progress notification). */
export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** How far a model call whose answer is not streamed yet has got (`turnProgress`). */
export interface TurnProgress {
  promptTokens: number;
  promptDone: number;
  generated: number;
}

export interface Turn {
  turn: number;
  attempt: number;
  status: string;
  text: string;
  thoughts: string;
  tools: ToolCall[];
  userTexts: string[];
  usage?: { promptTokens: number; completionTokens: number };
  startedMs?: number;
  finishedMs?: number;
  error?: string;
}

export interface SessionOwner {
  kind: 'agent' | 'channel';
  run?: string;
  node?: string;
  role?: string;
  channel?: string;
}

export interface SessionRecord {
  id: string;
  owner: SessionOwner;
  status: string;
  lastSeq: number;
  createdMs: number;
  updatedMs: number;
  workspace?: string;
  turns?: Turn[];
}

export interface Artifact {
  id: number;
  run: string;
  node?: string;
  kind: string;
  version: number;
  content: string;
  // A JSON card rendered as markdown by the server (absent for markdown artifacts).
  rendered?: string;
  status: 'draft' | 'awaiting_approval' | 'approved' | 'changes_requested';
  feedback?: string;
  createdMs: number;
  updatedMs: number;
}

export interface DiffLine {
  kind: 'added' | 'removed' | 'context' | string;
  text: string;
}

export interface Hunk {
  index: number;
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  lines: DiffLine[];
  header?: string;
}

export interface FileChange {
  path: string;
  oldPath?: string | null;
  status: string;
  binary: boolean;
  additions: number;
  deletions: number;
  hunks: Hunk[];
}

export type FileSelection = { type: 'all' } | { type: 'none' } | { type: 'hunks'; hunks: number[] };

export interface ChangesResponse {
  run: string;
  state: string;
  review: any;
  changeSet: { base: string; head: string; files: FileChange[] };
  selection: { files: Record<string, FileSelection> };
}

export interface CatalogEntry {
  source: { kind: string; path?: string };
  workflow: {
    metadata: { name: string; description?: string };
    stages: { stage_id: string; name: string; required: boolean; description?: string }[];
  };
}
