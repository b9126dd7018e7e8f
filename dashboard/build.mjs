// Bundles the dashboard: node build.mjs SRC_DIR NODE_MODULES OUT_DIR. src/main.js (and the CSS it
// imports) become OUT_DIR/app.js and app.css, minified, with no source maps and nothing loaded
// from elsewhere at run time; src/index.html is copied. CMake runs this (dashboard/CMakeLists.txt).
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [src, nodeModules, out] = process.argv.slice(2);
if (!src || !nodeModules || !out) {
  console.error('usage: node build.mjs SRC_DIR NODE_MODULES OUT_DIR');
  process.exit(2);
}
const esbuild = createRequire(join(nodeModules, 'x.js'))('esbuild');
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: join(src, 'main.js') },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  outdir: out,
  nodePaths: [nodeModules],
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(join(src, 'index.html'), join(out, 'index.html'));
