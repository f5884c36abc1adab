// Precompresses the build (web/dist) so `trellis serve` sends compressed bundles without
// compressing at run time: next to every text file over 1 KiB it writes `<file>.br` (Brotli,
// quality 11) and `<file>.gz` (gzip, level 9), each only when smaller than the original. The
// server embeds both and picks one by the request's Accept-Encoding.
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../dist/', import.meta.url).pathname;
const text = /\.(js|mjs|css|html|svg|json|map|txt)$/;
let raw = 0;
let br = 0;
let gz = 0;

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      walk(path);
      continue;
    }
    if (!text.test(name)) continue;
    const bytes = readFileSync(path);
    if (bytes.length <= 1024) continue;
    const b = brotliCompressSync(bytes, {
      params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length },
    });
    const g = gzipSync(bytes, { level: 9 });
    raw += bytes.length;
    if (b.length < bytes.length) {
      writeFileSync(`${path}.br`, b);
      br += b.length;
    }
    if (g.length < bytes.length) {
      writeFileSync(`${path}.gz`, g);
      gz += g.length;
    }
  }
}

walk(root);
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`compressed ${kb(raw)} of text: brotli ${kb(br)}, gzip ${kb(gz)}`);
