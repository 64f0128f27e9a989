import { lstatSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { detectRunner, type Runner } from './runners.js';

/**
 * One test selection from the model: a test id (`tests/test_a.py::test_x[1]`), a file or directory
 * (`tests/test_a.py`, `./pkg/...`), or a test name. Never an option (no leading `-`) and nothing a
 * shell would interpret; the argv is executed without a shell anyway.
 */
export const TestSelector = z
  .string()
  .min(1)
  .max(300)
  .regex(/^[^\s-]/, 'must not start with "-" or a space')
  .regex(/^[^;&|`$<>\\'"(){}!*?\p{Cc}]*$/u, 'must not contain shell syntax or control characters');

/** Options of each runner that take the next token as their value (so that token is not a test path). */
const VALUE_OPTIONS: Record<Exclude<Runner, 'generic'>, readonly string[]> = {
  pytest: ['-c', '-p', '-o', '-k', '-m', '-W', '-n', '--rootdir', '--confcutdir', '--basetemp', '--ignore'],
  jest: ['-c', '--config', '--rootDir', '--roots', '-t', '--testNamePattern', '--outputFile'],
  vitest: [
    '-c',
    '--config',
    '-r',
    '--root',
    '--dir',
    '-t',
    '--testNamePattern',
    '--outputFile',
    '--reporter',
  ],
  mocha: ['--config', '-g', '--grep', '-R', '--reporter', '-r', '--require', '--timeout', '--ignore'],
  'node-test': ['-r', '--require', '--import', '--loader', '--test-reporter-destination'],
  go: ['-run', '-skip', '-timeout', '-count', '-tags', '-p', '-parallel', '-coverprofile'],
};

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A selector that names a file, directory or test id rather than a test name. */
const isPathLike = (s: string) => s.includes('::') || s.includes('/') || /\.(py|[cm]?[jt]sx?|go)$/.test(s);

/** Whether `token` names something in the worktree (the maintainer's own selection of what to run). */
function inWorktree(worktree: string, token: string): boolean {
  const rel = path.posix.normalize(token.replace(/::.*$/, ''));
  if (path.posix.isAbsolute(rel) || rel.startsWith('..')) return false;
  try {
    lstatSync(path.join(worktree, rel));
    return true;
  } catch {
    return false;
  }
}

export type Selection = { ok: true; argv: string[] } | { ok: false; error: string };

/**
 * The test argv narrowed to `tests`, per runner: files and ids replace the command's own path
 * arguments; names become the runner's name filter (pytest `-k`, jest/vitest `-t`, mocha `--grep`,
 * node `--test-name-pattern`, go `-run`). Commands of unknown runners (npm scripts, make) cannot
 * be narrowed.
 */
export function selectTests(argv: readonly string[], tests: readonly string[], worktree: string): Selection {
  const runner = detectRunner(argv);
  if (runner === 'generic') {
    return {
      ok: false,
      error:
        `the test command (${argv.join(' ')}) is not a runner whose tests can be selected ` +
        '(pytest, jest, vitest, mocha, node --test, go test); run it without `tests`',
    };
  }
  const paths = tests.filter(isPathLike);
  const names = tests.filter((t) => !isPathLike(t));
  if (runner === 'go' && paths.some((p) => p.includes('::')))
    return { ok: false, error: 'go test selects packages (./pkg/...) and test names, not file::test ids' };
  // The first token after which options and paths belong to the runner itself.
  const start =
    runner === 'go'
      ? 2
      : Math.max(
          0,
          argv.findIndex((t) =>
            /^(pytest|py\.test|jest|vitest|vitest\.mjs|mocha|_mocha|--test)$/.test(path.posix.basename(t)),
          ),
        ) + 1;
  const valueOptions = VALUE_OPTIONS[runner];
  const isOwnPath = (t: string, i: number) =>
    i >= start &&
    !t.startsWith('-') &&
    !valueOptions.includes(argv[i - 1] ?? '') &&
    (runner === 'go' ? t.startsWith('./') || t.includes('...') : inWorktree(worktree, t));
  const kept = paths.length > 0 ? argv.filter((t, i) => !isOwnPath(t, i)) : [...argv];
  const pattern = names.map(escapeRegex).join('|');
  switch (runner) {
    case 'pytest':
      return { ok: true, argv: [...kept, ...(names.length ? ['-k', names.join(' or ')] : []), ...paths] };
    case 'jest':
    case 'vitest':
    case 'mocha':
      return {
        ok: true,
        argv: [...kept, ...(names.length ? [runner === 'mocha' ? '--grep' : '-t', pattern] : []), ...paths],
      };
    case 'node-test': {
      // node's own options must come before the files.
      const at = kept.indexOf('--test') + 1;
      const opts = names.length ? [`--test-name-pattern=${pattern}`] : [];
      return { ok: true, argv: [...kept.slice(0, at), ...opts, ...kept.slice(at), ...paths] };
    }
    case 'go': {
      const opts = names.length ? ['-run', `^(${pattern})$`] : [];
      return { ok: true, argv: [...kept.slice(0, 2), ...opts, ...kept.slice(2), ...paths] };
    }
  }
}
