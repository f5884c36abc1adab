// A loopback reverse proxy that adds `Authorization: Bearer <token>` to every request, for
// MCP checkers that cannot send headers (the conformance suite) against `trellis mcp --http`.
// A Host or Origin naming the proxy itself is rewritten to the target's; any other value
// (a DNS-rebinding probe) passes through unchanged, so the server still judges it.
//
//   node auth-proxy.mjs TARGET_URL TOKEN_FILE   → prints "proxy listening on http://127.0.0.1:PORT"
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [target, tokenFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();
const to = new URL(target);
const server = http.createServer((req, res) => {
  const self = `127.0.0.1:${server.address().port}`;
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  if (headers.host === self) headers.host = to.host;
  if (headers.origin === `http://${self}`) headers.origin = `http://${to.host}`;
  const up = http.request(
    { host: to.hostname, port: to.port, method: req.method, path: req.url, headers },
    (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    },
  );
  up.on('error', (e) => {
    res.writeHead(502).end(String(e));
  });
  req.pipe(up);
});
server.listen(0, '127.0.0.1', () => {
  console.log(`proxy listening on http://127.0.0.1:${server.address().port}`);
});
