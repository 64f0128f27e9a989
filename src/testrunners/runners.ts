import path from 'node:path';
import { z } from 'zod';

/** Where the sandbox mounts the worktree: the working directory of test runs, and the root runners' reports name paths under. */
export const CONTAINER_WORKTREE = '/workspace';

/** Test runners recognised from an argv (the judge adds reporters for them; run_tests selects tests). */
export const RunnerSchema = z.enum(['pytest', 'jest', 'vitest', 'node-test', 'mocha', 'go', 'generic']);
export type Runner = z.infer<typeof RunnerSchema>;

const base = (t: string | undefined) => (t === undefined ? '' : path.posix.basename(t));

/**
 * Which runner an argv invokes. Rules: a token named `pytest`/`py.test` or `-m pytest`; a token
 * named `jest` (or jest's bin script `jest.js`); a token named `vitest` (or its `vitest.mjs`); a token
 * named `mocha`/`_mocha`; `node … --test`;
 * `go test`. Anything else (npm scripts, make, shell) is `generic` and judged by exit code only.
 */
export function detectRunner(argv: readonly string[]): Runner {
  const names = argv.map(base);
  if (names.some((n) => n === 'pytest' || n === 'py.test')) return 'pytest';
  if (argv.some((t, i) => t === '-m' && argv[i + 1] === 'pytest')) return 'pytest';
  if (names.some((n) => n === 'jest' || (n === 'jest.js' && argv.some((t) => t.includes('/jest/')))))
    return 'jest';
  if (names.some((n) => n === 'vitest' || n === 'vitest.mjs')) return 'vitest';
  if (names.some((n) => n === 'mocha' || n === '_mocha')) return 'mocha';
  if (/^node(js)?$/.test(names[0] ?? '') && argv.includes('--test')) return 'node-test';
  if (names[0] === 'go' && argv[1] === 'test') return 'go';
  return 'generic';
}

/** The value of `--name=v`, `--name v` (or `-n v`, `-nv` for a one-letter flag), the last one given. */
function flagValue(argv: readonly string[], names: readonly string[]): string | undefined {
  let found: string | undefined;
  argv.forEach((t, i) => {
    for (const n of names) {
      if (t === n) found = argv[i + 1];
      else if (t.startsWith(`${n}=`)) found = t.slice(n.length + 1);
      else if (/^-[a-zA-Z]$/.test(n) && t.startsWith(n) && t.length > 2) found = t.slice(2);
    }
  });
  return found;
}

/** A worker count as runners write it: `4`, or a share of the CPUs (`50%`); null when it is neither. */
function workers(value: string | undefined, cpus: number): number | null {
  if (value === undefined) return null;
  const pct = /^(\d+(?:\.\d+)?)%$/.exec(value);
  if (pct) return Math.max(1, Math.floor((cpus * Number(pct[1])) / 100));
  return /^\d+$/.test(value) ? Math.max(1, Number(value)) : null;
}

/**
 * The CPUs a run of `argv` keeps busy in a sandbox of `cpus` CPUs: the runner's own worker count
 * where its flags set one (jest `--maxWorkers`/`-w`/`--runInBand`, vitest `--maxWorkers`/
 * `--no-file-parallelism`, mocha `--parallel --jobs`, pytest-xdist `-n`, node `--test-concurrency`,
 * go `-p`), one for runners that are serial by default (pytest, mocha), else all of them.
 */
export function runCpus(argv: readonly string[], cpus: number): number {
  const has = (...flags: string[]) => argv.some((t) => flags.includes(t));
  const all = (n: number | null) => Math.min(cpus, n ?? cpus);
  switch (detectRunner(argv)) {
    case 'jest':
      return has('--runInBand', '-i')
        ? Math.min(cpus, 1)
        : all(workers(flagValue(argv, ['--maxWorkers', '-w']), cpus));
    case 'vitest':
      return has('--no-file-parallelism', '--fileParallelism=false')
        ? Math.min(cpus, 1)
        : all(workers(flagValue(argv, ['--maxWorkers']), cpus));
    case 'mocha':
      return has('--parallel', '-p')
        ? all(workers(flagValue(argv, ['--jobs', '-j']), cpus))
        : Math.min(cpus, 1);
    case 'pytest': {
      const n = flagValue(argv, ['-n', '--numprocesses']);
      if (n === undefined) return Math.min(cpus, 1);
      return n === 'auto' || n === 'logical' ? cpus : all(workers(n, cpus));
    }
    case 'node-test':
      return all(workers(flagValue(argv, ['--test-concurrency']), cpus));
    case 'go':
      return all(workers(flagValue(argv, ['-p']), cpus));
    case 'generic':
      return cpus;
  }
}
