import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Counts git processes: a `git` first on PATH (in `dir`) that logs its arguments, one line a call, then
 * runs the real git. `during` runs with it on PATH; returns the logged argument lines.
 *
 * `command` counts another program the same way (`rm`).
 *
 * `meet` proves calls run at once: a call whose first argument is in a group waits (up to 3 s) until
 * every command of its group has started, and logs `<command> met` when they all did, `<command> alone`
 * when it waited in vain (calls made one after another).
 */
export async function gitCalls(
  dir: string,
  during: () => Promise<void>,
  meet: readonly (readonly string[])[] = [],
  command = 'git',
): Promise<string[]> {
  const bin = path.join(dir, 'shim-bin');
  const log = path.join(dir, 'git-calls.log');
  const arrived = path.join(dir, 'shim-arrived');
  const real = execFileSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).trim();
  mkdirSync(bin, { recursive: true });
  mkdirSync(arrived, { recursive: true });
  const waits = meet.map(
    (group) =>
      `  ${group.join('|')}) touch '${arrived}'/"$1"; n=0; while [ $n -lt 30 ]; do all=met; ` +
      `for c in ${group.join(' ')}; do [ -e '${arrived}'/"$c" ] || all=alone; done; ` +
      `[ $all = met ] && break; sleep 0.1; n=$((n+1)); done; echo "$1 $all" >> '${log}';;\n`,
  );
  const script = `#!/bin/sh\necho "$*" >> '${log}'\ncase "$1" in\n${waits.join('')}esac\nexec '${real}' "$@"\n`;
  writeFileSync(path.join(bin, command), script);
  chmodSync(path.join(bin, command), 0o755);
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
