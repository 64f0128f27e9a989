// Builds dist/ once for the whole jest run, when any source is newer than the last build: the tests that
// start the built CLI, serve, worker or store in other processes need it current. (It was built again in
// ten suites' beforeAll.)
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STAMP = path.join(ROOT, 'dist/.built'); // written by scripts/postbuild.mjs

function newest(p) {
  const s = statSync(p, { throwIfNoEntry: false });
  if (!s) return 0;
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(s.mtimeMs, ...readdirSync(p).map((f) => newest(path.join(p, f))));
}

export default function globalSetup() {
  const inputs = [
    'src',
    'prompts',
    'scripts/postbuild.mjs',
    'tsconfig.json',
    'tsconfig.build.json',
    'package.json',
  ];
  const built = statSync(STAMP, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  if (Math.max(...inputs.map((p) => newest(path.join(ROOT, p)))) <= built) return;
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
}
