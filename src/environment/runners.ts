import path from 'node:path';
import { z } from 'zod';

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
