// Loads a Chrome trace (`trellis runs trace --format chrome`) with Chrome DevTools' trace
// engine, the parser of the Performance panel (@paulirish/trace_engine, pinned in
// package-lock.json), and checks that it draws what the file holds: every complete event
// becomes an entry of its thread, and each entry's parent in the engine's tree encloses it.
// Prints a JSON summary; exits 1 when the engine drops or misplaces a slice.
//
//   node crates/telemetry/tests/node/chrome-trace.mjs trace.json
import fs from 'node:fs';
import * as Trace from '@paulirish/trace_engine/models/trace/trace.js';

// The engine reads window.DOMRect, which Node has not got.
globalThis.DOMRect ??= class DOMRect {
  constructor(x = 0, y = 0, width = 0, height = 0) {
    Object.assign(this, { x, y, width, height });
  }
};

const file = process.argv[2];
const json = JSON.parse(fs.readFileSync(file, 'utf8'));
const events = json.traceEvents;
const slices = events.filter((e) => e.ph === 'X');

const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const parsed = model.parsedTrace();
const renderer = (parsed.data ?? parsed).Renderer;

const problems = [];
const threads = [];
let entries = 0;
for (const proc of renderer.processes.values()) {
  for (const thread of proc.threads.values()) {
    const xs = thread.entries.filter((e) => e.ph === 'X');
    entries += xs.length;
    threads.push({ pid: proc.pid, tid: thread.tid, name: thread.name, entries: xs.length });
    for (const entry of xs) {
      const node = renderer.entryToNode.get(entry);
      const parent = node?.parent?.entry;
      if (!node) {
        problems.push(`${entry.name}: not in the thread's tree`);
      } else if (parent && !(parent.ts <= entry.ts && entry.ts + entry.dur <= parent.ts + parent.dur)) {
        problems.push(`${entry.name}: its parent ${parent.name} does not enclose it`);
      }
    }
  }
}
if (entries !== slices.length) {
  problems.push(`the file has ${slices.length} complete events, the engine drew ${entries}`);
}
console.log(JSON.stringify({ slices: slices.length, entries, threads, problems }));
process.exit(problems.length ? 1 : 0);
