// The workspace's tool knowledge graph (docs/tools.md): the tools the agents called,
// sized by PageRank and coloured by Louvain community, the learned dependencies (thicker when
// more certain), the speculation threshold with the share of speculations used and wasted,
// and the same as tables. Drawn with dagre, left to right.

import { graphlib, layout } from '@dagrejs/dagre';
import { useMemo } from 'preact/hooks';
import { get } from '../api';
import { InlineError, Spinner, useLoad } from '../ui';
import { clip, pathOf } from './Graph';

export interface ToolNode {
  tool: string;
  pagerank: number;
  community: number;
  calls: number;
  successes: number;
}
export interface ToolEdge {
  from: string;
  to: string;
  observedCount: number;
  confidence: number;
}
export interface ToolGraphResponse {
  workspace: string;
  nodes: ToolNode[];
  edges: ToolEdge[];
  speculation: { threshold: number; acceptance: number; waste: number; samples: number };
}

const W = 168;
const H = 44;
const pct = (x: number) => `${Math.round(x * 100)}%`;

function computeLayout(g: ToolGraphResponse) {
  const d = new graphlib.Graph({ multigraph: false });
  d.setGraph({ rankdir: 'LR', nodesep: 22, ranksep: 64, marginx: 12, marginy: 12 });
  d.setDefaultEdgeLabel(() => ({}));
  for (const n of g.nodes) d.setNode(n.tool, { width: W, height: H });
  const edges = g.edges.filter((e) => e.from !== e.to);
  for (const e of edges) d.setEdge(e.from, e.to, { weight: Math.max(1, Math.round(e.confidence * 4)) });
  layout(d);
  const gl = d.graph() as any;
  return {
    width: Math.max(gl.width ?? 0, 200),
    height: Math.max(gl.height ?? 0, 60),
    pos: new Map(g.nodes.map((n) => [n.tool, d.node(n.tool) as any as { x: number; y: number }])),
    edges: edges.map((e) => ({ ...e, points: ((d.edge(e.from, e.to) as any)?.points ?? []) as { x: number; y: number }[] })),
  };
}

export function ToolsPage() {
  const graph = useLoad(() => get<ToolGraphResponse>('/api/tools/graph'), []);
  if (graph.loading && !graph.data) return <Spinner label="Loading the tool knowledge graph" />;
  if (graph.error && !graph.data)
    return (
      <main class="page">
        <InlineError text={graph.error} testid="tools-error" />
      </main>
    );
  const g = graph.data!;
  return (
    <main class="page" data-testid="tools-page">
      <h1>Tool knowledge graph</h1>
      <Speculation s={g.speculation} />
      {g.nodes.length === 0 ? (
        <p class="muted" data-testid="tools-empty">
          Nothing learned yet: the graph learns from every agent's tool calls (<code>[tools.graph] learn = true</code>).
        </p>
      ) : (
        <ToolGraph g={g} />
      )}
    </main>
  );
}

function Speculation({ s }: { s: ToolGraphResponse['speculation'] }) {
  return (
    <p data-testid="tools-speculation">
      Speculation threshold <strong>{s.threshold.toFixed(2)}</strong>
      {s.samples === 0
        ? ': no speculation recorded yet.'
        : `; of the last ${s.samples} speculations ${pct(s.acceptance)} were used and ${pct(s.waste)} wasted (targets: over 95% used, under 10% wasted).`}
    </p>
  );
}

function ToolGraph({ g }: { g: ToolGraphResponse }) {
  const lay = useMemo(() => computeLayout(g), [g]);
  const maxRank = Math.max(...g.nodes.map((n) => n.pagerank), 1e-9);
  const nodes = [...g.nodes].sort((a, b) => b.pagerank - a.pagerank || a.tool.localeCompare(b.tool));
  const edges = [...g.edges].sort((a, b) => b.confidence - a.confidence || b.observedCount - a.observedCount);
  return (
    <>
      <p class="muted">
        {g.nodes.length} tool{g.nodes.length === 1 ? '' : 's'}, {g.edges.length} learned dependenc{g.edges.length === 1 ? 'y' : 'ies'}.
      </p>
      <div class="graph-wrap" data-testid="tool-graph">
        <svg class="graph" viewBox={`0 0 ${lay.width} ${lay.height}`} width={lay.width} height={lay.height} role="img" aria-label={`Tool knowledge graph: ${g.nodes.length} tools, ${g.edges.length} dependencies`}>
          <defs>
            <marker id="tool-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">
              <path d="M0,0 L10,5 L0,10 z" class="arrowhead" />
            </marker>
          </defs>
          <g class="edges">
            {lay.edges.map((e) => (
              <g key={`${e.from}→${e.to}`} class="edge" data-edge={`${e.from}→${e.to}`}>
                <title>{`${e.from} → ${e.to}: observed ${e.observedCount}, confidence ${e.confidence.toFixed(2)}`}</title>
                <path d={pathOf(e.points)} marker-end="url(#tool-arrow)" style={{ strokeWidth: 0.8 + 2.6 * e.confidence }} />
              </g>
            ))}
          </g>
          <g class="nodes">
            {g.nodes.map((n) => {
              const p = lay.pos.get(n.tool)!;
              const share = n.pagerank / maxRank;
              return (
                <g key={n.tool} class={`tool-node community-${n.community % 6}`} transform={`translate(${p.x - W / 2},${p.y - H / 2})`} data-testid={`tool-node-${n.tool}`}>
                  <title>{`${n.tool}: PageRank ${n.pagerank.toFixed(3)}, ${n.calls} calls (${n.successes} ok), community ${n.community}`}</title>
                  <rect class="box" width={W} height={H} rx={7} />
                  <rect class="bar" x={0} y={H - 4} width={Math.max(4, W * share)} height={4} rx={2} />
                  <text class="node-title" x={10} y={18}>
                    {clip(n.tool)}
                  </text>
                  <text class="node-sub" x={10} y={33}>
                    {`PageRank ${n.pagerank.toFixed(3)} · ${n.calls} calls`}
                  </text>
                </g>
              );
            })}
          </g>
        </svg>
      </div>
      <h2>Tools by PageRank</h2>
      <table class="task-table" data-testid="tool-table">
        <thead>
          <tr>
            <th scope="col">tool</th>
            <th scope="col">PageRank</th>
            <th scope="col">calls (ok)</th>
            <th scope="col">community</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.tool} data-testid="tool-row" data-tool={n.tool}>
              <td>
                <code>{n.tool}</code>
              </td>
              <td>{n.pagerank.toFixed(3)}</td>
              <td>
                {n.calls} ({n.successes})
              </td>
              <td>{n.community}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {edges.length > 0 && (
        <>
          <h2>Learned dependencies</h2>
          <table class="task-table" data-testid="tool-edges">
            <thead>
              <tr>
                <th scope="col">from → to</th>
                <th scope="col">observed</th>
                <th scope="col">confidence</th>
              </tr>
            </thead>
            <tbody>
              {edges.map((e) => (
                <tr key={`${e.from}→${e.to}`} data-testid="tool-edge-row">
                  <td>
                    <code>{e.from}</code> → <code>{e.to}</code>
                  </td>
                  <td>{e.observedCount}</td>
                  <td>{e.confidence.toFixed(2)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
