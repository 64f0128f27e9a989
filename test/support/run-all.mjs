// `npm test`: typecheck and lint (side by side: each uses one CPU), then, when both pass, every suite of
// every project in two jest invocations: all suites but test/projects.mjs ALONE with two workers, then
// ALONE in band. Arguments go to both jest invocations. Exits with the first failure's code; the second
// jest invocation runs even when the first failed, so one run shows every failure.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ALONE } from '../projects.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const JEST = ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js'];
const args = process.argv.slice(2);
const alone = Object.keys(ALONE).map((f) => `test/${f}.test.ts`);
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `npm run <script>` with its output held back and printed whole when it ends (no interleaving). */
const script = (name) =>
  new Promise((resolve) => {
    const child = spawn('npm', ['run', name], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => out.push(d));
    child.on('close', (code) => {
      process.stdout.write(Buffer.concat(out));
      resolve(code ?? 1);
    });
  });

const jest = (extra) =>
  spawnSync(process.execPath, [...JEST, ...extra, ...args], { cwd: ROOT, stdio: 'inherit' }).status ?? 1;

const checks = (await Promise.all([script('typecheck'), script('lint')])).find((code) => code !== 0);
if (checks !== undefined) {
  process.exitCode = checks;
} else {
  const shared = jest(['--maxWorkers=2', ...alone.map((f) => `--testPathIgnorePatterns=/${escape(f)}$`)]);
  const single = alone.length ? jest(['--runInBand', '--runTestsByPath', ...alone]) : 0;
  process.exitCode = shared || single;
}
