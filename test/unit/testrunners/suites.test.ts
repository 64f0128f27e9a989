import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { limitsNote } from '../../../src/agent/prompts.js';
import { loadConfig } from '../../../src/config/config.js';
import { testLimitMs } from '../../../src/environment/time-limits.js';
import type { RunOutcome, RunRequest, Sandbox } from '../../../src/environment/types.js';
import { readOnlyNote } from '../../../src/tools/run-command.js';
import { runCell, type CellContext } from '../../../src/verify/cells.js';
import { REPORT_DIR } from '../../../src/testrunners/reports/runner.js';
import { CONTAINER_ROOT } from '../../../src/testrunners/reports/types.js';
import { parseRepoConfig, repoLimits } from '../../../src/config/repo-config.js';

const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-suites-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One scripted run: what the runner writes into the worktree (path → content) and how it ends. */
interface Step {
  files?: Record<string, string>;
  outcome: Partial<RunOutcome>;
}

/** A sandbox that plays `steps` in order, writing each step's files where the container would. */
function scripted(steps: Step[]): Sandbox & { requests: RunRequest[] } {
  const requests: RunRequest[] = [];
  return {
    kind: 'local',
    requests,
    describe: () => ({}),
    available: async () => true,
    run: async (req) => {
      requests.push(req);
      const step = steps[requests.length - 1];
      if (!step) throw new Error(`unscripted run ${requests.length}`);
      for (const [file, content] of Object.entries(step.files ?? {})) {
        mkdirSync(path.dirname(path.join(req.worktree, file)), { recursive: true });
        writeFileSync(path.join(req.worktree, file), content);
      }
      return {
        exit_code: 0,
        stdout: '',
        stderr: '',
        stdout_truncated: false,
        stderr_truncated: false,
        timed_out: false,
        duration_ms: 1,
        status: 'passed',
        summary: null,
        ...step.outcome,
      };
    },
  };
}

/** A jest --json report of `tests` (name → passed?) in one file. */
const jestReport = (tests: Record<string, boolean>) =>
  JSON.stringify({
    testResults: [
      {
        name: `${CONTAINER_ROOT}/test/a.test.js`,
        status: Object.values(tests).every(Boolean) ? 'passed' : 'failed',
        assertionResults: Object.entries(tests).map(([title, ok]) => ({
          ancestorTitles: [],
          title,
          status: ok ? 'passed' : 'failed',
        })),
      },
    ],
  });

const context = (sandbox: Sandbox, argv: string[], over: Partial<CellContext> = {}): CellContext => ({
  sandbox,
  worktree: mkdtempSync(path.join(dir, 'wt-')),
  argv,
  timeoutMs: 60_000,
  maxOutputBytes: 1 << 20,
  maxReportBytes: 1 << 20,
  reruns: 1,
  allowEmpty: false,
  ...over,
});
const spec = { name: 'base', source: 'base', tests: 'base' } as const;

describe('a cell with no results', () => {
  it('is "no results" when a re-run times out, never a flip of every test', async () => {
    const tests = Object.fromEntries(Array.from({ length: 263 }, (_, i) => [`t${i}`, i !== 0]));
    const sandbox = scripted([
      {
        files: { [`${REPORT_DIR}/jest.json`]: jestReport(tests) },
        outcome: { exit_code: 1, status: 'failed' },
      },
      { outcome: { exit_code: null, status: 'timeout', timed_out: true } },
    ]);
    const cell = await runCell(spec, context(sandbox, ['npx', 'jest']));
    expect(cell.runs).toBe(2);
    expect(cell.flaky).toEqual([]);
    expect(cell.counts).toMatchObject({ passed: 262, failed: 1 });
    expect(cell.problem).toBe('re-run 1: timed out after 60 s');
  });

  it('still lists the tests that really changed between runs that reported', async () => {
    const sandbox = scripted([
      {
        files: { [`${REPORT_DIR}/jest.json`]: jestReport({ a: false, b: true }) },
        outcome: { exit_code: 1, status: 'failed' },
      },
      { files: { [`${REPORT_DIR}/jest.json`]: jestReport({ a: true, b: true }) }, outcome: { exit_code: 0 } },
    ]);
    const cell = await runCell(spec, context(sandbox, ['npx', 'jest']));
    expect(cell.flaky).toEqual(['test/a.test.js > a']);
    expect(cell.problem).toBeNull();
  });
});

describe('time limits from the project', () => {
  const limits = loadConfig({}).limits;

  it('the ceiling until the suite is measured, then 5 × its time within floor and ceiling', () => {
    expect(limits).toMatchObject({ maxTestTimeoutMs: 1_800_000, minTestTimeoutMs: 60_000 });
    expect(testLimitMs(limits, null)).toBe(1_800_000);
    expect(testLimitMs(limits, 20_400)).toBe(102_000); // a 1,200-test jest suite alone
    expect(testLimitMs(limits, 2_000)).toBe(60_000);
    expect(testLimitMs(limits, 1_000_000)).toBe(1_800_000);
    // A floor above the ceiling is the ceiling.
    expect(testLimitMs({ maxTestTimeoutMs: 30_000, minTestTimeoutMs: 60_000 }, 1_000)).toBe(30_000);
  });

  it("a repository's test_timeout_s lowers the operator's ceiling, never raises it", () => {
    const parse = (text: string) => {
      const r = parseRepoConfig(text, { ceilings: loadConfig({}).ceilings, model: { allowlist: [] } });
      if (!r.ok) throw new Error(r.error);
      return repoLimits(limits, r.config).maxTestTimeoutMs;
    };
    expect(parse('test_timeout_s: 600')).toBe(600_000);
    expect(parse('test_timeout_s: 7200')).toBe(1_800_000);
    expect(parse('label: fix')).toBe(1_800_000);
  });

  it('the task text states the limits and budgets', () => {
    expect(limitsNote(limits, { toolCalls: 60, timeMs: 1_800_000 })).toBe(
      'A test run may take up to 1800 s. Your first full `run_tests` (all of the default target) measures the ' +
        'suite; later runs, and the judge that checks your fix, get 5 × its time (at least 60 s, at most 1800 s), ' +
        'so make that first run a full one. You have 60 tool calls and 30 minutes in all, building the test ' +
        'environment included.',
    );
    expect(readFileSync(new URL('../../../prompts/task.md', import.meta.url), 'utf8')).toContain(
      '{{limits}}',
    );
  });
});

describe('the read-only root says so', () => {
  it.each([
    ["Error: ENOENT: no such file or directory, mkdir '/node_modules/.vite-temp'", true],
    ["EROFS: read-only file system, open '/deps/x'", true],
    ['OSError: [Errno 30] Read-only file system', true],
    ["ENOENT: no such file or directory, mkdir '/workspace/out/a'", false],
    ["ENOENT: no such file or directory, open '/tmp/x'", false],
  ])('%s', (stderr, readOnly) => {
    const note = readOnlyNote({ stdout: '', stderr });
    if (readOnly) expect(note?.note).toMatch(/read-only root.*\/workspace.*\/tmp \(HOME=\/tmp, TMPDIR=\/tmp/);
    else expect(note).toBeNull();
  });
});
