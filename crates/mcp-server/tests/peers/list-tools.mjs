// Lists the tools of an MCP server on stdio with the official TypeScript SDK's client, which
// compiles every output schema (ajv) and warns on stderr about what JSON Schema does not
// define ("unknown format …"). Prints the number of tools.
//   node list-tools.mjs COMMAND [ARG…]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "trellis-list-tools", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
const { tools } = await client.listTools();
console.log(tools.length);
await client.close();
