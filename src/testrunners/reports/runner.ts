import { detectRunner, type Runner } from '../runners.js';
import { parseGoTestJson } from './gotest.js';
import { parseJestJson } from './jest.js';
import { parseJunitXml } from './junit.js';
import { parseMochaJson } from './mocha.js';
import { parsePytestSummary } from './pytest.js';
import { parseTap } from './tap.js';
import type { ParsedResults, TestResult } from './types.js';
import { CONTAINER_ROOT } from './types.js';

/** Directory, relative to the worktree root, where instrumented runners write their reports. */
export const REPORT_DIR = '.agenticfix-report';

export { detectRunner };

const REPORT_FILE: Partial<Record<Runner, string>> = {
  pytest: 'pytest.xml',
  jest: 'jest.json',
  vitest: 'vitest.json',
  'node-test': 'node.tap',
  mocha: 'mocha.json',
};

export interface InstrumentedCommand {
  runner: Runner;
  argv: string[];
  /** Report file relative to the worktree root, or null when results come from stdout (go) or nowhere (generic). */
  reportFile: string | null;
  /** Where a shell command sends the runner's stdout (see instrumentShell): its report when the judge's is missing. */
  stdoutFile?: string | null;
}

/** A runner's own report flag: its names, whether it takes a value (`--f=v` or `--f v`), which values count. */
interface ReportFlag {
  names: readonly string[];
  value: boolean;
  /** Only these values are the runner's report (vitest keeps its other reporters: they print to stdout). */
  only?: RegExp;
  /** vitest's `--outputFile.json=…`: a dotted suffix names the same flag. */
  dotted?: boolean;
}

/**
 * The report flags a command may already carry (SWE-bench-style rows do). They are replaced, not
 * doubled: jest crashes after the run on two `--outputFile` (an array), vitest refuses to start, mocha
 * takes one reporter, node pairs reporters with destinations by position, and a path of the row's
 * own may lie on the read-only root. pytest-json-report's flags go too: the judge reads its JUnit XML.
 */
const OWN_REPORT_FLAGS: Record<Runner, readonly ReportFlag[]> = {
  pytest: [
    { names: ['--junitxml', '--junit-xml', '--json-report-file'], value: true },
    { names: ['--json-report'], value: false },
  ],
  jest: [
    { names: ['--json'], value: false },
    { names: ['--outputFile'], value: true },
  ],
  vitest: [
    { names: ['--reporter'], value: true, only: /^json$/ },
    { names: ['--outputFile'], value: true, dotted: true },
  ],
  mocha: [
    { names: ['--reporter', '-R'], value: true },
    { names: ['--reporter-option', '--reporter-options', '-O'], value: true },
  ],
  'node-test': [{ names: ['--test-reporter', '--test-reporter-destination'], value: true }],
  go: [{ names: ['-json', '--json'], value: false }],
  generic: [],
};

/** `argv` without the runner's own report flags (up to a `--`, after which words are arguments). */
export function withoutReportFlags(runner: Runner, argv: readonly string[]): string[] {
  const flags = OWN_REPORT_FLAGS[runner];
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]!;
    if (tok === '--') return [...out, ...argv.slice(i)];
    const flag = flags.find((f) =>
      f.names.some((n) => tok === n || tok.startsWith(`${n}=`) || (f.dotted && tok.startsWith(`${n}.`))),
    );
    if (!flag) {
      out.push(tok);
      continue;
    }
    const eq = tok.indexOf('=');
    const inline = eq >= 0;
    const value = !flag.value ? '' : inline ? tok.slice(eq + 1) : (argv[i + 1] ?? '');
    if (flag.only && !flag.only.test(value)) {
      out.push(tok);
      continue;
    }
    if (flag.value && !inline) i++;
  }
  return out;
}

/**
 * Replaces the command's own report flags (see OWN_REPORT_FLAGS) with the judge's, so per-test results
 * land in a file inside the worktree (the container's root is read-only). pytest: `--junitxml=… -o junit_family=xunit1 -rA`
 * appended (before a `--`, like every appended flag; xunit1 records the file, giving real node ids;
 * -rA is the fallback when no XML is written); jest: `--json --outputFile=…`; vitest:
 * `--reporter=json --outputFile=…`; mocha: `--reporter json --reporter-option output=…`; node: `--test-reporter=tap --test-reporter-destination=…` inserted right
 * after `--test` (node options must precede file arguments); go: `-json` inserted after `test`.
 */
export function instrumentArgv(argv: readonly string[]): InstrumentedCommand {
  const runner = detectRunner(argv);
  const file = REPORT_FILE[runner];
  const reportFile = file ? `${REPORT_DIR}/${file}` : null;
  const inContainer = reportFile ? `${CONTAINER_ROOT}/${reportFile}` : '';
  const out = withoutReportFlags(runner, argv);
  // Options go before a `--`: after it they would be file arguments.
  const end = out.includes('--') ? out.indexOf('--') : out.length;
  const add = (...flags: string[]) => out.splice(end, 0, ...flags);
  switch (runner) {
    case 'pytest':
      add(`--junitxml=${inContainer}`, '-o', 'junit_family=xunit1', '-rA');
      break;
    case 'jest':
      add('--json', `--outputFile=${inContainer}`);
      break;
    case 'vitest':
      // vitest's json reporter writes jest's --json layout.
      add('--reporter=json', `--outputFile=${inContainer}`);
      break;
    case 'mocha':
      add('--reporter', 'json', '--reporter-option', `output=${inContainer}`);
      break;
    case 'node-test':
      out.splice(
        out.indexOf('--test') + 1,
        0,
        '--test-reporter=tap',
        `--test-reporter-destination=${inContainer}`,
      );
      break;
    case 'go':
      out.splice(2, 0, '-json');
      break;
    case 'generic':
      break;
  }
  return { runner, argv: out, reportFile };
}

/**
 * Per-test results of one run. For a known runner `per_test` stays true even when its report is
 * missing or unreadable: an empty result list then fails the cross-check instead of silently
 * degrading to exit codes. Only `generic` commands fall back to `per_test: false`.
 */
export function collectResults(runner: Runner, stdout: string, report: string | null): ParsedResults {
  const done = (source: string, results: TestResult[] | null): ParsedResults => ({
    runner,
    per_test: true,
    source: results ? source : `${source} (missing or unreadable)`,
    results: results ?? [],
  });
  switch (runner) {
    case 'pytest':
      if (report && /<testsuite\b/.test(report))
        return done('junit-xml', parseJunitXml(report, { pytest: true }));
      return done('pytest-rA', parsePytestSummary(stdout));
    case 'jest':
      return done('jest-json', report === null ? null : parseJestJson(report));
    case 'vitest':
      return done('vitest-json', report === null ? null : parseJestJson(report));
    case 'mocha':
      return done('mocha-json', parseMochaJson(report ?? stdout));
    case 'node-test':
      return done('tap', report === null ? null : parseTap(report));
    case 'go':
      return done('go-json', parseGoTestJson(stdout));
    case 'generic':
      return { runner, per_test: false, source: 'exit-code', results: [] };
  }
}

export interface CrossCheck {
  ok: boolean;
  /** True when the only problem is that no test was collected (a repository may have no tests yet). */
  empty: boolean;
  /** Why the results cannot be trusted (null when they can). */
  problem: string | null;
}

/** Checks parsed results against the exit code: a run that failed must say which tests failed, and vice versa. */
export function crossCheck(parsed: ParsedResults, exitCode: number | null): CrossCheck {
  const bad = (problem: string, empty = false): CrossCheck => ({ ok: false, empty, problem });
  if (exitCode === null) return bad('the test command reported no exit code');
  if (!parsed.per_test) return { ok: true, empty: false, problem: null };
  if (parsed.results.length === 0)
    return bad(`no test collected (${parsed.source}, exit code ${exitCode})`, true);
  const failing = parsed.results.filter((r) => r.status === 'failed' || r.status === 'error').length;
  if (exitCode !== 0 && failing === 0)
    return bad(`exit code ${exitCode} but no failed test in the ${parsed.source} report`);
  if (exitCode === 0 && failing > 0)
    return bad(`${failing} failing tests in the ${parsed.source} report but exit code 0`);
  return { ok: true, empty: false, problem: null };
}
