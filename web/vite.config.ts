import { defineConfig } from 'vite';

// `npm run dev` proxies the API to a running `trellis serve`: TRELLIS_URL (default
// http://127.0.0.1:8420). The server refuses cross-origin state changes, so the proxy presents
// the target's own origin.
const target = process.env.TRELLIS_URL ?? 'http://127.0.0.1:8420';
const proxy = {
  target,
  changeOrigin: true,
  ws: true,
  headers: { origin: target },
};

export default defineConfig({
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    target: 'es2022',
    sourcemap: false,
    chunkSizeWarningLimit: 300,
  },
  server: {
    host: '127.0.0.1',
    proxy: { '/api': proxy, '/login': proxy, '/ws': proxy },
  },
});
