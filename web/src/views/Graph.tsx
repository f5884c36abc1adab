// The run's graph: stages laid out with dagre (left to right), fan-out children collapsed into
// one group box with counts per state, collectors drawn as such, planned routes (success solid,
// failure dashed: retry loops) and the routes actually taken (bold). Node colours follow the
// state. The layout is recomputed only when the structure changes; state changes re-colour.

import { graphlib, layout } from '@dagrejs/dagre';
import { useMemo } from 'preact/hooks';
import type { RunModel, NodeInfo } from '../runModel';

const W = 176;
const H = 56;
export const GROUP_PREFIX = 'group:';

interface LEdge {
  from: string;
  to: string;
  kind: 'success' | 'failure' | 'fanout' | 'taken';
  label?: string;
  taken: boolean;
  points: { x: number; y: number }[];
}

interface Layout {
  width: number;
  height: number;
  pos: Map<string, { x: number; y: number }>;
  edges: LEdge[];
  ids: string[];
}

const isCollector = (id: string) => id.endsWith(':collect');
const TERMINALS = new Set(['DONE', 'ABORT']);

function computeLayout(m: RunModel): Layout {
  const top = m.topLevel();
  const ids = new Set(top.map((n) => n.id));
  const groupOf = (id: string): string => {
    const n = m.nodes.get(id);
    if (n?.parent) return GROUP_PREFIX + topAncestor(m, id);
    return id;
  };
  const groups = [...m.children.keys()].filter((p) => ids.has(p) || m.nodes.get(p)?.parent == null);
  for (const p of groups) ids.add(GROUP_PREFIX + p);

  const edges = new Map<string, Omit<LEdge, 'points'>>();
  const add = (from: string, to: string, kind: LEdge['kind'], label?: string) => {
    if (!ids.has(from) || !ids.has(to) || from === to) return;
    const key = `${from}→${to}`;
    const cur = edges.get(key);
    if (cur) {
      if (cur.kind === 'taken' && kind !== 'taken') Object.assign(cur, { kind, label, taken: true });
      return;
    }
    edges.set(key, { from, to, kind, label, taken: false });
  };
  if (m.entry && ids.has('upfront_retrieval')) add('upfront_retrieval', m.entry, 'success');
  const stages = new Set(m.routing.map((r) => r.stage));
  for (const r of m.routing) {
    const src = ids.has(`${r.stage}:collect`) ? `${r.stage}:collect` : r.stage;
    add(src, r.next_on_success, 'success');
    const loop = stages.has(r.next_on_failure);
    add(src, r.next_on_failure, 'failure', loop ? `retry${r.max_attempts ? ` ≤${r.max_attempts}` : ''}` : 'on failure');
  }
  // A fan-out stage reaches its collector through its children (the group, once spawned).
  for (const r of m.routing) if (ids.has(`${r.stage}:collect`) && !m.children.has(r.stage)) add(r.stage, `${r.stage}:collect`, 'fanout');
  for (const p of groups) {
    add(p, GROUP_PREFIX + p, 'fanout');
    if (ids.has(`${p}:collect`)) add(GROUP_PREFIX + p, `${p}:collect`, 'fanout');
  }
  for (const e of m.added) add(groupOf(e.from), groupOf(e.to), 'success');
  for (const key of m.taken) {
    const [from, to] = key.split('→');
    const a = groupOf(from);
    const b = groupOf(to);
    add(a, b, 'taken');
    const cur = edges.get(`${a}→${b}`);
    if (cur) cur.taken = true;
  }
  // A fan-out parent's direct edge to its collector is drawn through the group.
  for (const p of groups) edges.delete(`${p}→${p}:collect`);

  const g = new graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: 'LR', nodesep: 28, ranksep: 56, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const id of ids) g.setNode(id, { width: W, height: id.startsWith(GROUP_PREFIX) ? H + 10 : H });
  for (const e of edges.values()) {
    // Failure edges back to an earlier stage must not pull the layout around.
    const back = e.kind === 'failure' && e.label?.startsWith('retry');
    g.setEdge(e.from, e.to, { weight: back ? 0 : e.kind === 'failure' ? 1 : 3, minlen: 1, width: e.label ? 60 : 0, height: e.label ? 14 : 0, labelpos: 'c' });
  }
  layout(g);
  const pos = new Map<string, { x: number; y: number }>();
  for (const id of ids) {
    const n = g.node(id) as any;
    pos.set(id, { x: n.x, y: n.y });
  }
  const out: LEdge[] = [];
  for (const e of edges.values()) {
    const le = g.edge(e.from, e.to) as any;
    out.push({ ...e, points: le?.points ?? [] });
  }
  const gl = g.graph() as any;
  return { width: Math.max(gl.width ?? 0, 200), height: Math.max(gl.height ?? 0, 80), pos, edges: out, ids: [...ids] };
}

function topAncestor(m: RunModel, id: string): string {
  let cur = m.nodes.get(id);
  let guard = 0;
  while (cur?.parent && guard++ < 100) {
    const p = m.nodes.get(cur.parent);
    if (!p) return cur.parent;
    if (!p.parent) return p.id;
    cur = p;
  }
  return id;
}

export function pathOf(points: { x: number; y: number }[]): string {
  if (!points.length) return '';
  let d = `M${points[0].x},${points[0].y}`;
  if (points.length === 2) return d + ` L${points[1].x},${points[1].y}`;
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i];
    const n = points[i + 1];
    const mx = (p.x + n.x) / 2;
    const my = (p.y + n.y) / 2;
    d += ` Q${p.x},${p.y} ${i === points.length - 2 ? `${n.x},${n.y}` : `${mx},${my}`}`;
  }
  return d;
}

const STATE_SHORT: Record<string, string> = {
  READY: 'ready',
  RUNNING: 'running',
  COMPLETED: 'completed',
  FAILED: 'failed',
  WAITING_INPUT: 'needs input',
  PRUNED: 'pruned',
  SKIPPED: 'skipped',
  PENDING: 'not reached',
};

export function clip(s: string, n = 22) {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

export function GraphView(props: { model: RunModel; selected: string | null; onSelect: (id: string) => void }) {
  const m = props.model;
  const lay = useMemo(() => computeLayout(m), [m, m.structure]);
  return (
    <div class="graph-wrap" data-testid="run-graph">
      <svg
        class="graph"
        viewBox={`0 0 ${lay.width} ${lay.height}`}
        width={lay.width}
        height={lay.height}
        role="group"
        aria-label={`Graph of run ${m.id}: ${lay.ids.length} nodes`}
      >
        <defs>
          <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">
            <path d="M0,0 L10,5 L0,10 z" class="arrowhead" />
          </marker>
        </defs>
        <g class="edges" aria-hidden="true">
          {lay.edges.map((e) => (
            <g key={`${e.from}→${e.to}`} class={`edge edge-${e.kind}${e.taken ? ' edge-taken' : ''}`} data-edge={`${e.from}→${e.to}`}>
              <path d={pathOf(e.points)} marker-end="url(#arrow)" />
              {e.label && e.points.length > 1 && (
                <text x={e.points[Math.floor(e.points.length / 2)].x} y={e.points[Math.floor(e.points.length / 2)].y - 4} class="edge-label">
                  {e.label}
                </text>
              )}
            </g>
          ))}
        </g>
        <g class="nodes">
          {lay.ids.map((id) => {
            const p = lay.pos.get(id)!;
            if (id.startsWith(GROUP_PREFIX)) return <GroupNode key={id} m={m} parent={id.slice(GROUP_PREFIX.length)} x={p.x} y={p.y} selected={props.selected === id} onSelect={props.onSelect} />;
            const n = m.nodes.get(id);
            if (!n) return null;
            return <Node key={id} n={n} x={p.x} y={p.y} selected={props.selected === id} onSelect={props.onSelect} />;
          })}
        </g>
      </svg>
      <Legend />
    </div>
  );
}

function keyActivate(e: KeyboardEvent, f: () => void) {
  if (e.key === 'Enter' || e.key === ' ') {
    e.preventDefault();
    f();
  }
}

function Node({ n, x, y, selected, onSelect }: { n: NodeInfo; x: number; y: number; selected: boolean; onSelect: (id: string) => void }) {
  const state = n.state ?? 'PENDING';
  const collector = isCollector(n.id);
  const terminal = TERMINALS.has(n.id);
  const sub = [STATE_SHORT[state] ?? state];
  if (n.attempt > 1) sub.push(`attempt ${n.attempt}`);
  if (collector) sub.unshift('collector');
  const label = `${n.id}: ${state}${n.attempt > 1 ? `, attempt ${n.attempt}` : ''}${collector ? ', collector' : ''}`;
  return (
    <g
      class={`node state-${state}${selected ? ' selected' : ''}${collector ? ' collector' : ''}${terminal ? ' terminal' : ''}`}
      transform={`translate(${x - W / 2},${y - H / 2})`}
      // lower case: Preact sets SVG attributes as written, and SVG ignores `tabIndex`
      tabindex={0}
      role="button"
      aria-pressed={selected}
      aria-label={label}
      data-testid={`graph-node-${n.id}`}
      data-state={state}
      data-attempt={n.attempt}
      onClick={() => onSelect(n.id)}
      onKeyDown={(e) => keyActivate(e, () => onSelect(n.id))}
    >
      <title>{label}</title>
      <rect class="ring" x={-4} y={-4} width={W + 8} height={H + 8} rx={14} />
      <rect class="box" width={W} height={H} rx={collector ? 22 : terminal ? 28 : 8} />
      <text x={12} y={22} class="node-title">
        {clip(n.id, 21)}
      </text>
      <text x={12} y={41} class="node-sub">
        {sub.join(' · ')}
      </text>
      {n.branches > 0 && (
        <g class="loop-badge" transform={`translate(${W - 32},${H - 20})`} aria-hidden="true">
          <rect width={24} height={16} rx={8} />
          <text x={12} y={12}>
            ↻{n.branches}
          </text>
        </g>
      )}
      {state === 'RUNNING' && <circle class="pulse" cx={W - 10} cy={10} r={4} />}
    </g>
  );
}

const ORDER = ['RUNNING', 'WAITING_INPUT', 'READY', 'FAILED', 'COMPLETED', 'PRUNED', 'SKIPPED', 'PENDING'];

function GroupNode({ m, parent, x, y, selected, onSelect }: { m: RunModel; parent: string; x: number; y: number; selected: boolean; onSelect: (id: string) => void }) {
  const counts = m.groupCounts(parent);
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const h = H + 10;
  const parts = ORDER.filter((s) => counts[s]);
  const label = `${total} fan-out children of ${parent}: ${parts.map((s) => `${counts[s]} ${s}`).join(', ')}`;
  let offset = 0;
  const id = GROUP_PREFIX + parent;
  return (
    <g
      class={`node group${selected ? ' selected' : ''}`}
      transform={`translate(${x - W / 2},${y - h / 2})`}
      // lower case: Preact sets SVG attributes as written, and SVG ignores `tabIndex`
      tabindex={0}
      role="button"
      aria-pressed={selected}
      aria-label={label}
      data-testid={`graph-group-${parent}`}
      data-total={total}
      onClick={() => onSelect(id)}
      onKeyDown={(e) => keyActivate(e, () => onSelect(id))}
    >
      <title>{label}</title>
      <rect class="ring" x={-4} y={-4} width={W + 8} height={h + 8} rx={14} />
      <rect class="box stack" x={6} y={-6} width={W} height={h} rx={8} />
      <rect class="box" width={W} height={h} rx={8} />
      <text x={12} y={20} class="node-title">
        {total} × {clip(parent, 16)}
      </text>
      <text x={12} y={38} class="node-sub">
        {parts
          .slice(0, 3)
          .map((s) => `${counts[s]} ${STATE_SHORT[s]}`)
          .join(' · ')}
      </text>
      <g transform={`translate(12,${h - 14})`}>
        {parts.map((s) => {
          const w = ((W - 24) * counts[s]) / Math.max(total, 1);
          const r = <rect key={s} class={`bar state-${s}`} x={offset} y={0} width={w} height={6} />;
          offset += w;
          return r;
        })}
      </g>
    </g>
  );
}

function Legend() {
  return (
    <ul class="legend" aria-label="Node states">
      {['READY', 'RUNNING', 'WAITING_INPUT', 'COMPLETED', 'FAILED', 'PRUNED', 'SKIPPED', 'PENDING'].map((s) => (
        <li key={s}>
          <span class={`swatch state-${s}`} aria-hidden="true" />
          {STATE_SHORT[s]}
        </li>
      ))}
      <li>
        <span class="swatch-line failure" aria-hidden="true" /> failure / retry route
      </li>
      <li>
        <span class="swatch-line taken" aria-hidden="true" /> route taken
      </li>
    </ul>
  );
}
