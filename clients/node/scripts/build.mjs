// Compiles src/ twice with the TypeScript compiler: dist/esm (ES modules) and dist/cjs
// (CommonJS), each with its .d.ts files and a package.json that tells Node the module type.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
rmSync(join(root, 'dist'), { recursive: true, force: true });
for (const [flavour, type] of [['esm', 'module'], ['cjs', 'commonjs']]) {
  execFileSync(process.execPath, [tsc, '-p', join(root, `tsconfig.${flavour}.json`)], {
    cwd: root, stdio: 'inherit',
  });
  mkdirSync(join(root, 'dist', flavour), { recursive: true });
  writeFileSync(join(root, 'dist', flavour, 'package.json'), `{ "type": "${type}" }\n`);
}
