// Runs the contract suite (test/contract.test.ts: the app against GitHub's published descriptions) and
// prints its figures; with --json, only {"contract": {...}} goes to stdout. Exits non-zero on a violation.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const json = process.argv.includes('--json');
const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-contract-'));
const file = path.join(dir, 'summary.json');
const jest = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--runInBand', 'test/contract.test.ts'],
  {
    env: { ...process.env, AGENTICFIX_CONTRACT_SUMMARY: file },
    // Jest reports on stderr; its stdout would only mix with the JSON.
    stdio: ['ignore', json ? 'ignore' : 'inherit', 'inherit'],
  },
);
let contract;
try {
  contract = JSON.parse(readFileSync(file, 'utf8'));
} catch {
  contract = null;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (json) process.stdout.write(`${JSON.stringify({ contract })}\n`);
else console.log('contract:', contract);
process.exit(jest.status === 0 && contract && contract.violations === 0 ? 0 : 1);
