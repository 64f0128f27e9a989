import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../config/config.js';
import { NODE_REPO, runtimeImage } from '../images/base-images.js';
import { machineCa } from '../images/build-ca.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { dockerAvailable } from '../environment/docker.js';
import { nodeRecipe } from '../environment/node.js';
import { testLimitMs } from '../environment/time-limits.js';
import type { Sandbox } from '../environment/types.js';
import { runCell } from '../verify/cells.js';
import { cellConcurrency, inPool } from '../verify/judge.js';
import type { Cell } from '../verify/types.js';
import type { BenchOptions } from './options.js';

/**
 * jest, vitest and mocha with their lockfile (the node-runners test's: one image for both). Same place
 * from src/bench and dist/bench.
 */
const NODE_PROJECT = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../test/fixtures/node-runners',
);

const RUNNERS = {
  jest: { dir: 'test/jest', ext: 'test.js', argv: ['jest', 'test/jest'] },
  vitest: { dir: 'test/vitest', ext: 'test.mjs', argv: ['vitest', 'run', 'test/vitest'] },
  mocha: { dir: 'test/mocha', ext: 'spec.js', argv: ['mocha', 'test/mocha'] },
} as const;
type RunnerName = keyof typeof RUNNERS;

/** One generated test file: `tests` cases of a little real work each (slug and sort over a few hundred words). */
function testFile(runner: RunnerName, file: number, tests: number): string {
  const head =
    runner === 'vitest'
      ? "import { describe, it, expect } from 'vitest';\nimport { createRequire } from 'node:module';\nconst { slugify } = createRequire(import.meta.url)('../../slug.js');\n"
      : "const { slugify } = require('../../slug.js');\n" +
        (runner === 'mocha' ? "const assert = require('node:assert');\n" : '');
  const check =
    runner === 'mocha'
      ? 'assert.strictEqual(out.length, words.length);'
      : 'expect(out).toHaveLength(words.length);';
  const cases = Array.from(
    { length: tests },
    (_, i) => `  it('case ${i}', () => {
    const words = Array.from({ length: 300 }, (_, k) => 'Word ' + ((k * ${i + 7}) % 97) + ' of ${file}!');
    const out = words.map(slugify).sort();
    ${check}
  });`,
  );
  return `${head}\ndescribe('generated ${file}', () => {\n${cases.join('\n')}\n});\n`;
}

/** The fixture project with `files` × `tests` generated tests per runner in place of its own, as a worktree. */
export function generatedProject(parent: string, files: number, tests: number): string {
  const dir = mkdtempSync(path.join(parent, 'suite-'));
  cpSync(NODE_PROJECT, dir, { recursive: true });
  for (const [runner, r] of Object.entries(RUNNERS) as [RunnerName, (typeof RUNNERS)[RunnerName]][]) {
    rmSync(path.join(dir, r.dir), { recursive: true, force: true });
    mkdirSync(path.join(dir, r.dir), { recursive: true });
    for (let f = 0; f < files; f++)
      writeFileSync(path.join(dir, r.dir, `gen-${f}.${r.ext}`), testFile(runner, f, tests));
  }
  return dir;
}

/** The four cells of one judge call, scheduled as the judge schedules them, each in its own copy. */
async function judgeCells(
  config: Config,
  sandbox: Sandbox,
  worktrees: string[],
  argv: readonly string[],
  timeoutMs: number,
): Promise<{ ms: number; atOnce: number; cells: Cell[] }> {
  const atOnce = cellConcurrency(config, argv);
  const cells: Cell[] = [];
  const t = Date.now();
  await inPool(worktrees, atOnce, async (worktree) => {
    cells.push(
      await runCell(
        { name: 'base', source: 'base', tests: 'base' },
        {
          sandbox,
          worktree,
          argv,
          timeoutMs,
          maxOutputBytes: config.limits.maxOutputBytes,
          maxReportBytes: config.verify.maxReportBytes,
          reruns: config.verify.flakyReruns,
          allowEmpty: false,
        },
      ),
    );
  });
  return { ms: Date.now() - t, atOnce, cells };
}

/** The operator's configuration; as the tests do, on a machine whose egress re-signs TLS, npm in a build gets its CA. */
export function benchConfig(tmp: string): Config {
  const base = loadConfig();
  const caFile = base.sandbox.buildNetwork.caFile ?? machineCa(tmp) ?? undefined;
  return { ...base, sandbox: { ...base.sandbox, buildNetwork: { ...base.sandbox.buildNetwork, caFile } } };
}

/**
 * Real suites of jest, vitest and mocha at the size of a real project's (1,200 generated tests each;
 * `--smoke`: 12): the first full run measures the suite, the derived limit follows (testLimitMs), and
 * the judge's four cells run under that limit, scheduled by cellConcurrency. Reports per runner the
 * suite time, the limit, the judge's wall time and how many cells ran at once, and the timeouts.
 */
export async function benchSuites({ smoke }: BenchOptions): Promise<Record<string, number | string>> {
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { skipped: 'no Docker engine reachable' };
  const tmp = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-suites-'));
  const config = benchConfig(tmp);
  const builder = new DockerEnvironmentBuilder(docker, config.sandbox);
  const runId = `bench-suites-${Date.now()}`;
  const [files, tests] = smoke ? [2, 6] : [40, 30];
  try {
    const project = generatedProject(tmp, files, tests);
    const nodeImage = runtimeImage(await builder.baseImages(), NODE_REPO);
    const recipe = nodeRecipe(project, { nodeImage, baseImage: config.sandbox.baseImage });
    const dockerfile = [...recipe!, ''].join('\n');
    const built = await builder.build({ dockerfile, worktree: project, runId });
    if (!built.success || !built.image_id) throw new Error(`bench build failed: ${built.error}`);
    const sandbox = builder.sandboxFor(built.image_id);
    const copies = Array.from({ length: 4 }, () => generatedProject(tmp, files, tests));
    const out: Record<string, number | string> = {
      tests_per_runner: files * tests,
      image_build_ms: built.duration_ms,
    };
    let timeouts = 0;
    for (const [name, r] of Object.entries(RUNNERS)) {
      // The first full run, as run_tests makes it: at the ceiling, measured.
      const full = await sandbox.run({
        argv: r.argv,
        worktree: project,
        timeoutMs: config.limits.maxTestTimeoutMs,
        maxOutputBytes: config.limits.maxOutputBytes,
      });
      if (full.status !== 'passed')
        throw new Error(`${name}: the full run ${full.status}: ${full.stderr.slice(-500)}`);
      const limit = testLimitMs(config.limits, full.duration_ms);
      const judged = await judgeCells(config, sandbox, copies, r.argv, limit);
      const timedOut = judged.cells.filter((c) => c.status === 'timeout').length;
      const incomplete = judged.cells.filter(
        (c) => c.status !== 'timeout' && (c.problem !== null || c.results.length !== files * tests),
      );
      if (incomplete.length > 0)
        throw new Error(
          `${name}: a cell without full results: ${incomplete[0]!.problem ?? incomplete[0]!.output_tail}`,
        );
      timeouts += timedOut;
      out[`${name}_full_suite_ms`] = full.duration_ms;
      out[`${name}_limit_s`] = limit / 1000;
      out[`${name}_judge_cells_ms`] = judged.ms;
      out[`${name}_cells_at_once`] = judged.atOnce;
      out[`${name}_slowest_cell_ms`] = Math.max(...judged.cells.map((c) => c.duration_ms));
      out[`${name}_timeouts`] = timedOut;
    }
    out.timeouts = timeouts;
    return out;
  } finally {
    await builder.release(runId).catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  }
}
