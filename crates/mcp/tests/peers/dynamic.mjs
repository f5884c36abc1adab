// A small MCP server (stdio) whose tool list changes at run time: calling `grow` adds a tool
// `extra`, and the SDK sends notifications/tools/list_changed. Used by the trellis-mcp tests.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const server = new McpServer({ name: 'dynamic', version: '1.0.0' });
server.registerTool('grow', { description: 'Adds the tool `extra`' }, async () => {
  server.registerTool('extra', { description: 'Added at run time' }, async () => ({
    content: [{ type: 'text', text: 'extra works' }],
  }));
  return { content: [{ type: 'text', text: 'added extra' }] };
});
server.registerTool('fail', { description: 'Always fails (isError)' }, async () => ({
  isError: true,
  content: [{ type: 'text', text: 'the disk is full' }],
}));
await server.connect(new StdioServerTransport());
