// `npm test`'s jest part: every suite of every project, in two invocations. First all suites but
// test/projects.mjs ALONE with two workers, then ALONE in band. Arguments are passed to both. Exits with
// the first failure's code, after both ran (a failure in the first still shows the second's).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ALONE } from '../projects.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const JEST = ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js'];
const args = process.argv.slice(2);
const alone = Object.keys(ALONE).map((f) => `test/${f}.test.ts`);
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const jest = (extra) =>
  spawnSync(process.execPath, [...JEST, ...extra, ...args], { cwd: ROOT, stdio: 'inherit' }).status ?? 1;

const shared = jest(['--maxWorkers=2', ...alone.map((f) => `--testPathIgnorePatterns=/${escape(f)}$`)]);
const single = alone.length ? jest(['--runInBand', '--runTestsByPath', ...alone]) : 0;
process.exitCode = shared || single;
