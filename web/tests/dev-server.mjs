// A throw-away workspace served by a real `trellis serve` with the loopback mock model, for
// developing the UI (`npm run dev` proxies to it).
//
//   node tests/dev-server.mjs [--pace MS]
//
// Prints one JSON line: {"url", "login", "token", "port", "mock", "repo"}. Ctrl-C (or SIGTERM)
// stops both processes and removes the directory. See tests/server.mjs.
import { startTrellis } from './server.mjs';

const args = process.argv.slice(2);
const i = args.indexOf('--pace');
const srv = await startTrellis({ pace: i >= 0 ? Number(args[i + 1]) : 300 });
const quit = () => void srv.stop().then(() => process.exit(0));
process.on('SIGINT', quit);
process.on('SIGTERM', quit);
const { url, login, token, port, mock, repo } = srv;
console.log(JSON.stringify({ url, login, token, port, mock, repo }));
