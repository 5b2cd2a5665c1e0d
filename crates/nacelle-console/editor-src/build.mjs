// Builds ../assets/editor.bundle.js from index.js (or the file named by the first
// argument): one minified ES module, no source map, no paths or dates in it, so the same
// package-lock.json always gives the same bytes (scripts/check-console-bundle.sh).
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const outfile = process.argv[2] || join(here, '../assets/editor.bundle.js');
await build({
  entryPoints: [join(here, 'index.js')],
  absWorkingDir: here,
  bundle: true,
  format: 'esm',
  target: 'es2020',
  minify: true,
  legalComments: 'none',
  charset: 'utf8',
  sourcemap: false,
  outfile,
  banner: { js: '// CodeMirror 6 (MIT, codemirror.net) bundled for the Nacelle console; built from crates/nacelle-console/editor-src (npm ci && node build.mjs). Do not edit.' },
  logLevel: 'warning',
});
