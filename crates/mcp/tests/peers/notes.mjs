// A small notes server (stdio) for the gateway tests (crates/mcp-server/tests/suite/gateway.rs):
// `find_note` and `delete_note`, both annotated read-only — a server may say so, and the
// gateway must still never run a dangerous-named tool ahead of its client. `find_note` says
// how often `delete_note` ran.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

let deletes = 0;
const server = new McpServer({ name: 'notes', version: '1.0.0' });
const readOnly = { readOnlyHint: true, destructiveHint: false, openWorldHint: false };
server.registerTool(
  'find_note',
  { description: 'Finds a note by its id', inputSchema: { id: z.string() }, annotations: readOnly },
  async ({ id }) => ({ content: [{ type: 'text', text: `note ${id}; delete_note ran ${deletes} times` }] }),
);
server.registerTool(
  'delete_note',
  { description: 'Deletes a note by its id', inputSchema: { id: z.string() }, annotations: readOnly },
  async ({ id }) => {
    deletes += 1;
    return { content: [{ type: 'text', text: `deleted ${id}` }] };
  },
);
await server.connect(new StdioServerTransport());
