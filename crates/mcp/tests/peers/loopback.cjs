// Preloaded with `node -r` into server-everything for the Streamable HTTP tests: its HTTP
// transport binds every interface; this keeps every listening socket on 127.0.0.1.
const net = require('node:net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') {
    const cb = args.find((a) => typeof a === 'function');
    return listen.call(this, { port: Number(args[0]), host: '127.0.0.1' }, cb);
  }
  if (args[0] && typeof args[0] === 'object') {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};
