import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Counts git processes: a `git` first on PATH (in `dir`) that logs its arguments, one line a call, then
 * runs the real git. `during` runs with it on PATH; returns the logged argument lines.
 */
export async function gitCalls(dir: string, during: () => Promise<void>): Promise<string[]> {
  const bin = path.join(dir, 'shim-bin');
  const log = path.join(dir, 'git-calls.log');
  const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  mkdirSync(bin, { recursive: true });
  writeFileSync(path.join(bin, 'git'), `#!/bin/sh\necho "$*" >> '${log}'\nexec '${real}' "$@"\n`);
  chmodSync(path.join(bin, 'git'), 0o755);
  writeFileSync(log, '');
  const PATH = process.env.PATH;
  process.env.PATH = `${bin}:${PATH}`;
  try {
    await during();
  } finally {
    process.env.PATH = PATH;
  }
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}
