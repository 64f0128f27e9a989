import { stripAnsi } from './output.js';

export interface TestSummary {
  passed: number;
  failed: number;
  errors: number;
  skipped: number;
  /** Which runner's output produced the numbers (pytest, jest, node-test, generic…). */
  source: string;
}

export type RunStatus = 'passed' | 'failed' | 'timeout' | 'error' | 'cancelled';

/**
 * Counts from the closing lines of common test runners, so the agent and the judge read one shape
 * whatever the runner. Best effort: null when nothing recognisable was printed.
 */
export function parseTestSummary(stdout: string, stderr: string): TestSummary | null {
  const text = stripAnsi(`${stdout}\n${stderr}`);
  for (const parse of PARSERS) {
    const s = parse(text);
    if (s) return s;
  }
  return null;
}

/** The status of a finished (not cancelled) run. */
export function statusFromExit(exitCode: number | null, timedOut: boolean): RunStatus {
  if (timedOut) return 'timeout';
  if (exitCode === null) return 'error';
  return exitCode === 0 ? 'passed' : 'failed';
}

type Parser = (text: string) => TestSummary | null;

const summary = (source: string, c: Partial<Omit<TestSummary, 'source'>>): TestSummary => ({
  passed: c.passed ?? 0,
  failed: c.failed ?? 0,
  errors: c.errors ?? 0,
  skipped: c.skipped ?? 0,
  source,
});

const lastMatch = (text: string, re: RegExp): RegExpMatchArray | null => {
  let last: RegExpMatchArray | null = null;
  for (const m of text.matchAll(re)) last = m;
  return last;
};

/** `name` → count pairs such as "3 passed, 2 failed, 1 error". */
const counts = (line: string): Map<string, number> => {
  const out = new Map<string, number>();
  for (const m of line.matchAll(/(\d+) ([a-z]+)/g)) out.set(m[2] ?? '', Number(m[1]));
  return out;
};

// `==== 3 passed, 2 failed, 1 error in 0.12s ====` / `no tests ran in 0.01s`
const pytest: Parser = (text) => {
  const m = lastMatch(
    text,
    /^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)(?:, )?)+|no tests ran) in [\d.]+s\b.*$/gm,
  );
  if (!m) return null;
  const c = counts(m[1] ?? '');
  return summary('pytest', {
    passed: (c.get('passed') ?? 0) + (c.get('xpassed') ?? 0),
    failed: c.get('failed') ?? 0,
    errors: (c.get('error') ?? 0) + (c.get('errors') ?? 0),
    skipped: (c.get('skipped') ?? 0) + (c.get('xfailed') ?? 0),
  });
};

// `Tests:       2 failed, 1 skipped, 3 passed, 6 total`
const jest: Parser = (text) => {
  const m = lastMatch(text, /^Tests:\s+(.*\d+ total)\s*$/gm);
  if (!m) return null;
  const c = counts(m[1] ?? '');
  // A suite that failed to run (an import error) is in no test count: each is an error.
  const suites = new Set<string>();
  let file = '';
  for (const line of text.split('\n')) {
    file = /^\s*(?:FAIL|PASS)\s+(\S+)/.exec(line)?.[1] ?? file;
    if (/^\s*● Test suite failed to run$/.test(line)) suites.add(file);
  }
  return summary('jest', {
    passed: c.get('passed'),
    failed: c.get('failed'),
    errors: suites.size,
    skipped: (c.get('skipped') ?? 0) + (c.get('todo') ?? 0),
  });
};

// vitest: `      Tests  3 failed | 41 passed | 2 skipped (46)` (after ` Test Files  …`)
const vitest: Parser = (text) => {
  const m = lastMatch(text, /^\s*Tests\s{2,}(\d+ [a-z]+(?: \| \d+ [a-z]+)*) \(\d+\)\s*$/gm);
  if (!m || !/^\s*Test Files\s/m.test(text)) return null;
  const c = counts(m[1] ?? '');
  // A file that failed to load or holds no suite (`FAIL  file [ file ]`) is in no test count: each is an error.
  const suites = new Set([...text.matchAll(/^\s*FAIL\s+(\S+) \[ \1 \]\s*$/gm)].map((x) => x[1]));
  return summary('vitest', {
    passed: c.get('passed'),
    failed: c.get('failed'),
    errors: suites.size,
    skipped: (c.get('skipped') ?? 0) + (c.get('todo') ?? 0),
  });
};

// TAP reporter `# pass 3` / spec reporter `ℹ pass 3`, with `fail`, `skipped`, `todo`, `cancelled`.
const nodeTest: Parser = (text) => {
  const field = (name: string) => {
    const m = lastMatch(text, new RegExp(`^(?:#|ℹ) ${name} (\\d+)\\s*$`, 'gm'));
    return m ? Number(m[1]) : undefined;
  };
  const passed = field('pass');
  const failed = field('fail');
  if (passed === undefined || failed === undefined) return null;
  return summary('node-test', {
    passed,
    failed,
    errors: field('cancelled'),
    skipped: (field('skipped') ?? 0) + (field('todo') ?? 0),
  });
};

// `Ran 5 tests in 0.01s` followed by `OK`, `OK (skipped=1)` or `FAILED (failures=2, errors=1)`.
const unittest: Parser = (text) => {
  const ran = lastMatch(text, /^Ran (\d+) tests? in [\d.]+s\s*$/gm);
  if (!ran) return null;
  const after = text.slice((ran.index ?? 0) + ran[0].length);
  const verdict = /^(OK|FAILED)(?: \((.*)\))?\s*$/m.exec(after);
  if (!verdict) return null;
  const detail = new Map<string, number>();
  for (const m of (verdict[2] ?? '').matchAll(/([a-z ]+)=(\d+)/g))
    detail.set((m[1] ?? '').trim(), Number(m[2]));
  const failed = detail.get('failures') ?? 0;
  const errors = detail.get('errors') ?? 0;
  const skipped = (detail.get('skipped') ?? 0) + (detail.get('expected failures') ?? 0);
  return summary('unittest', {
    passed: Math.max(0, Number(ran[1]) - failed - errors - skipped),
    failed: failed + (detail.get('unexpected successes') ?? 0),
    errors,
    skipped,
  });
};

// `--- PASS: TestX (0.00s)` per top-level test with -v; otherwise `ok  pkg 0.01s` / `FAIL pkg 0.01s` per package.
const goTest: Parser = (text) => {
  const tests = [...text.matchAll(/^--- (PASS|FAIL|SKIP): \S+/gm)].map((m) => m[1]);
  if (tests.length > 0) {
    return summary('go-test', {
      passed: tests.filter((t) => t === 'PASS').length,
      failed: tests.filter((t) => t === 'FAIL').length,
      skipped: tests.filter((t) => t === 'SKIP').length,
    });
  }
  const pkgs = [...text.matchAll(/^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))/gm)].map((m) => m[1]);
  if (pkgs.length === 0) return null;
  return summary('go-test', {
    passed: pkgs.filter((p) => p === 'ok').length,
    failed: pkgs.filter((p) => p === 'FAIL').length,
  });
};

// `  3 passing (12ms)`, `  2 failing`, `  1 pending`
const mocha: Parser = (text) => {
  const passing = lastMatch(text, /^\s*(\d+) passing \(\d+m?s\)\s*$/gm);
  if (!passing) return null;
  const failing = lastMatch(text, /^\s*(\d+) failing\s*$/gm);
  const pending = lastMatch(text, /^\s*(\d+) pending\s*$/gm);
  return summary('mocha', {
    passed: Number(passing[1]),
    failed: failing ? Number(failing[1]) : 0,
    skipped: pending ? Number(pending[1]) : 0,
  });
};

// Anything else that prints `N passed` and/or `N failed` on one line.
const generic: Parser = (text) => {
  const m = lastMatch(text, /^.*\b\d+ (?:passed|failed)\b.*$/gm);
  if (!m) return null;
  const c = counts(m[0]);
  return summary('generic', {
    passed: c.get('passed'),
    failed: c.get('failed'),
    errors: (c.get('error') ?? 0) + (c.get('errors') ?? 0),
    skipped: c.get('skipped'),
  });
};

// Specific runners first: the generic pattern also matches pytest and jest lines.
const PARSERS: Parser[] = [pytest, jest, vitest, nodeTest, unittest, goTest, mocha, generic];
