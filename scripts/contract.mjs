// Runs the contract suite (test/app/emulator/contract.test.ts: the app against GitHub's published descriptions) and
// the embedded demo with its revision (test/docker/demo/demo-revise.test.ts: the real app, Docker and the scripted
// model), and prints their figures; with --json, only {"contract": {...}} goes to stdout. Every emulator
// they start checks its requests and answers as it closes (test/support/contract-setup.ts) and appends
// its figures to the record read here. Exits non-zero on a violation, a failed test, or a demo that did
// not run (the Docker engine is required: CI=true makes a missing one a failure, not a skip).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const SUITES = ['test/app/emulator/contract.test.ts', 'test/docker/demo/demo-revise.test.ts'];
const json = process.argv.includes('--json');
const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-contract-'));
const file = path.join(dir, 'record.jsonl');
const jest = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--runInBand', ...SUITES],
  {
    env: { ...process.env, CI: 'true', AGENTICFIX_CONTRACT_SUMMARY: file },
    // Jest reports on stderr; its stdout would only mix with the JSON.
    stdio: ['ignore', json ? 'ignore' : 'inherit', 'inherit'],
  },
);
let lines = [];
try {
  lines = readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map(JSON.parse);
} catch {
  // no record: nothing ran
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const sum = (key) => lines.reduce((n, l) => n + (l[key] ?? 0), 0);
const contract = {
  operations: new Set(lines.flatMap((l) => l.operations ?? [])).size,
  requests_checked: sum('requests_checked'),
  responses_checked: sum('responses_checked'),
  payload_examples: sum('payload_examples'),
  violations: sum('violations'),
};
const missing = SUITES.map((s) => path.basename(s)).filter((s) => !lines.some((l) => l.suite === s));
if (missing.length > 0) console.error(`contract: no figures from ${missing.join(', ')}`);
if (json) process.stdout.write(`${JSON.stringify({ contract })}\n`);
else console.log('contract:', contract);
process.exit(jest.status === 0 && missing.length === 0 && contract.violations === 0 ? 0 : 1);
