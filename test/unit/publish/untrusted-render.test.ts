import { progressStatus } from '../../../src/pipeline/progress.js';
import { runBody } from '../../../src/web/run-page.js';
import { runList } from '../../../src/web/list-page.js';
import { attemptBody, attemptsSection, type AttemptEntry } from '../../../src/web/attempts-page.js';
import { publishExtra, type Attempt } from '../../../src/pipeline/attempts.js';
import type { RunContext } from '../../../src/pipeline/context.js';
import type { RepairResult } from '../../../src/agent/types.js';
import type { RepairProgress } from '../../../src/pipeline/types.js';
import {
  blockedPathsNote,
  ciBlockedNote,
  ciFlagNote,
  collapsed,
  configComment,
  cutMiddle,
  evidenceComment,
  fitBody,
  prBody,
  prTitle,
  revisionComment,
  revisionsSection,
  traceComment,
  unverifiedComment,
} from '../../../src/publish/render.js';
import { renderStatus } from '../../../src/publish/status.js';
import { unmarked } from '../../../src/trace/marker.js';
import type { RunRecord } from '../../../src/store/store.js';
import { renderMarkdown } from '../../../src/verify/markdown.js';
import type { Cell, VerificationReport } from '../../../src/verify/types.js';
import { code, codeBlock, inert } from '../../../src/verify/untrusted.js';

/**
 * Issue 23, item 4: file names and flag snippets (model- and test-written text) reached the evidence
 * comment as raw HTML (`<!--` hid the rest of the comment from reviewers, `<img src=…>` loaded). Every
 * renderer that takes untrusted text gets hostile strings in every untrusted field, and what GitHub
 * would interpret as Markdown (everything outside code spans and code blocks) must hold no HTML but
 * the app's own tags, no mention, no link, and tables keep their columns.
 */

/** What GitHub renders as Markdown: the text outside code spans and fenced code blocks. */
function visible(md: string): string {
  const out: string[] = [];
  let unit: string[] = [];
  const flush = () => {
    if (unit.length > 0) out.push(stripSpans(unit.join('\n')));
    unit = [];
  };
  let fence: string | null = null;
  let html = false;
  for (const line of md.split('\n')) {
    if (fence !== null) {
      const m = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (m?.[1] && m[1][0] === fence[0] && m[1].length >= fence.length) fence = null;
      continue;
    }
    if (html) {
      // An HTML block runs to a blank line, and nothing in it is Markdown: code spans do not protect.
      if (line.trim() === '') html = false;
      else out.push(line);
      continue;
    }
    const open = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (open?.[1] && !(open[1][0] === '`' && (open[2] ?? '').includes('`'))) {
      flush();
      fence = open[1];
    } else if (/^ {0,3}</.test(line)) {
      flush();
      html = true;
      out.push(line);
    } else if (line.trim() === '') flush();
    else if (line.startsWith('|')) {
      // Table rows are split at unescaped pipes before anything else; each cell is inline on its own.
      flush();
      out.push(...line.split(/(?<!\\)\|/).map(stripSpans));
    } else {
      // List items, headings and quotes start a block of their own; other lines continue a paragraph.
      if (/^(- |#|>)/.test(line)) flush();
      unit.push(line);
    }
  }
  flush();
  return out.join('\n');
}

/** The text with its code spans (CommonMark pairing: a run of n backticks closes at the next run of exactly n) removed. */
function stripSpans(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const at = text.indexOf('`', i);
    if (at < 0) return out + text.slice(i);
    out += text.slice(i, at);
    let n = at;
    while (text[n] === '`') n++;
    const run = n - at;
    if (text[at - 1] === '\\') {
      out += '`';
      i = at + 1;
      continue;
    }
    let close = -1;
    for (let j = text.indexOf('`', n); j >= 0;) {
      let k = j;
      while (text[k] === '`') k++;
      if (k - j === run) {
        close = j;
        break;
      }
      j = text.indexOf('`', k);
    }
    if (close < 0) {
      out += text.slice(at, n); // an unclosed run is literal text
      i = n;
    } else {
      out += '⟨code⟩';
      i = close + run;
    }
  }
  return out;
}

const APP_TAGS = new Set(['<details>', '</details>', '<summary>', '</summary>', '<sub>', '</sub>']);
const APP_LOGIN = 'alice';

/**
 * What would render from untrusted text: HTML, comments, mentions, links, broken tables. The app's own
 * write marker that ends a body (trace/marker.ts) is no untrusted text.
 */
function problems(md: string): string[] {
  const seen = visible(unmarked(md));
  const found: string[] = [];
  for (const m of seen.matchAll(/<\/?[A-Za-z!?][^<>\n]{0,40}>?/g))
    if (!APP_TAGS.has(m[0])) found.push(`HTML ${JSON.stringify(m[0])}`);
  for (const m of seen.matchAll(/(?:^|[^\w`])@[A-Za-z0-9][\w/-]*/g))
    if (m[0].trim().replace(/^[^@]/, '') !== `@${APP_LOGIN}`) found.push(`mention ${JSON.stringify(m[0])}`);
  for (const m of seen.matchAll(/\]\s*\(|<https?:|&#\d+;/gi)) found.push(`link ${JSON.stringify(m[0])}`);
  // Every row of a table has as many cells as its header.
  const lines = md.split('\n');
  const cells = (l: string) => l.split(/(?<!\\)\|/).length;
  lines.forEach((l, i) => {
    const prev = lines[i - 1];
    if (l.startsWith('|') && prev?.startsWith('|') && cells(l) !== cells(prev))
      found.push(`table row ${i}: ${cells(l)} cells after ${cells(prev)}`);
  });
  return found;
}

/** Hostile pieces; the strings tested are every ordered pair, and the long line with each piece. */
const PIECES = [
  '<!--',
  '-->',
  '<img src=x onerror=alert(1)>',
  '<b>bold</b>',
  '</details>',
  '<details><summary>s</summary>',
  '@org/team',
  '@admin',
  '[x](javascript:alert(1))',
  '](javascript:alert(1))',
  '<https://evil.example>',
  '&#60;img src=x&#62;',
  '`',
  '``',
  '```',
  '````x',
  '~~~',
  '\r\n',
  '\n\n',
  '\r',
  '|',
  '\\|',
  '#123',
  'acme/other#7',
  ' ',
];
const LONG = 'y'.repeat(10_000);
const HOSTILE = [
  ...PIECES.flatMap((a) => PIECES.map((b) => a + b)),
  ...PIECES.flatMap((p) => [LONG + p, p + LONG]),
];

const run = (over: Partial<RunRecord> = {}) =>
  ({
    id: 'r1',
    base_commit: 'b'.repeat(40),
    triggered_by: APP_LOGIN,
    trigger: 'label',
    model: null,
    issue: 5,
    revision: 2,
    head_commit: 'c'.repeat(40),
    issue_updated_at: null,
    ...over,
  }) as RunRecord;

const result = (h: string): RepairResult => ({
  run_id: 'r1',
  stop_reason: 'completed',
  base_commit: 'b'.repeat(40),
  patch: `--- a/x\n+++ b/x\n@@ -1 +1 @@\n-${h}\n+${h}\n`,
  patch_path: '/x/final.patch',
  patch_skipped: [],
  trace_path: '/x/events.jsonl',
  result_path: '/x/result.json',
  run_dir: '/x',
  dockerfile: `FROM x\nRUN ${h}\n`,
  image_id: h,
  summary: h,
  tokens: { prompt: 10, completion: 5, cached: 0, total: 15 },
  cost_usd: 0.0001,
  requests: 1,
  tool_calls: 1,
  duration_ms: 1000,
  phases_ms: { agent: 4500 },
  model_name: h,
  prompt_hash: h,
  last_test: null,
  suite_ms: null,
  worktree_path: null,
  error: h,
});

function cell(name: Cell['name'], h: string): Cell {
  return {
    name,
    source: 'base',
    tests: 'base',
    argv: [h],
    exit_code: 1,
    status: 'failed',
    runs: 1,
    duration_ms: 10,
    runner: 'pytest',
    per_test: true,
    report_source: h,
    counts: { passed: 0, failed: 1, errors: 0, skipped: 0 },
    results: [],
    flaky: [],
    problem: h,
    output_tail: h,
  } as Cell;
}

/** A report with `h` in every field a patch, its tests or its build can write. */
function hostileReport(h: string): VerificationReport {
  const many = Array.from({ length: 12 }, (_, i) => `${h}${i}`);
  return {
    verdict: 'regression',
    reason: `test ${h} failed`,
    base_commit: 'b'.repeat(40),
    flags: many,
    mode: 'task',
    run_id: 'j',
    repo: 'r',
    per_test: true,
    patch: { files: [h], test_files: [h], source_files: [h] },
    tests_modified: many,
    image: { id: h, tag: h, no_cache: false, reused: false, build_ms: 1, dockerfile_sha256: 'f'.repeat(64) },
    build_error: h,
    cells: [cell('base', h), cell('patched', h)],
    evidence: { reproduced: many, regressions: many, new_tests_failing: many, fail_both: many, flaky: many },
    task: {
      instance_id: h,
      resolved: false,
      FAIL_TO_PASS: { success: [], failure: many, missing: many },
      PASS_TO_PASS: { success: many, failure: many, missing: [] },
    },
    phases: null,
    commands: [h, h],
    duration_ms: 1,
    started_at: '2026-01-01T00:00:00Z',
  };
}

/** Attempts whose model-written fields (reason, model name as answered or configured) are `h`. */
const hostileAttempts = (h: string): Attempt[] =>
  [1, 2].map((n) => ({
    n,
    run_id: `r1-a${n}`,
    verdict: n === 1 ? 'verified' : 'regression',
    reason: h,
    stop_reason: h,
    changed_lines: 2,
    changed_files: 1,
    f2p: 1,
    p2p: null,
    cost_usd: 0.01,
    duration_ms: 5,
    published: n === 1,
    model: h,
  }));
// No public URL: the checks count every link, and the links to the attempts' pages are the app's own.
const attemptsContext = { s: { config: { web: { publicUrl: null } } }, run: run() } as RunContext;

/** Every renderer that takes untrusted text, each with `h` in all of its untrusted inputs. */
const RENDERERS: Record<string, (h: string) => string> = {
  renderMarkdown: (h) => renderMarkdown(hostileReport(h)),
  // Issue 41: the attempts table of the evidence comment and the status comment's attempt lines.
  attempts: (h) => {
    const extra = publishExtra(attemptsContext, hostileAttempts(h));
    return [...extra.evidence, extra.status].join('\n\n');
  },
  prBody: (h) => prBody({ issue: 5, run: run(), result: result(h), report: hostileReport(h) }),
  evidenceComment: (h) => evidenceComment(run(), renderMarkdown(hostileReport(h)), [ciFlagNote([h, 'a'])]),
  revisionComment: (h) =>
    revisionComment(
      run({ triggered_by: h, trigger: 'review' }),
      'd'.repeat(40),
      'e'.repeat(40),
      renderMarkdown(hostileReport(h)),
      [ciFlagNote([h])],
    ),
  unverifiedComment: (h) =>
    unverifiedComment({
      run: run(),
      result: result(h),
      report: hostileReport(h),
      evidence: renderMarkdown(hostileReport(h)),
      why: `${blockedPathsNote([h])}\n\n${ciBlockedNote([h])}`,
    }),
  traceComment: (h) =>
    traceComment(
      run(),
      result(h),
      [
        {
          type: 'tool_end',
          name: h,
          args: { path: h },
          result: { success: false, error_code: h },
          duration_ms: 500,
        },
        { type: 'model_reply', usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
        'not json',
      ]
        .map((e) => (typeof e === 'string' ? e : JSON.stringify(e)))
        .join('\n'),
    ),
  configComment: (h) =>
    configComment({
      run: run({ triggered_by: h }),
      result: result(h),
      model: h,
      budgets: { steps: 1 },
      testArgv: [h, h],
      dockerfileSource: `maintainer Dockerfile ${code(h)}`,
      buildNetwork: { proxy: false, ca: false },
    }),
  revisionsSection: (h) =>
    revisionsSection(
      (['review', 'mention', 'checks', 'rerun'] as const).map((trigger) => ({
        revision: 1,
        pushed_commit: 'd'.repeat(40),
        trigger,
        triggered_by: h,
        verdict: 'verified',
        id: 'r1',
        cost_usd: null,
      })) as never,
    ),
  collapsed: (h) => collapsed('Candidate patch', h, 20_000, 'diff'),
  // The status comment's detail is the pipeline's (job.ts): an error or a reason, made inert there.
  renderStatus: (h) =>
    renderStatus('r1', 'b'.repeat(40), { phase: 'failed', lastTest: 'failed', detail: `Error: ${inert(h)}` }),
  // A build step is the model's Dockerfile line, echoed by the builder.
  statusBuildLine: (h) => renderStatus('r1', 'b'.repeat(40), progressStatus(building(h, 90_000))),
};

function building(step: string, elapsed_ms: number): RepairProgress {
  return {
    phase: 'building_environment',
    step: 0,
    tokens_used: 0,
    token_budget: 1000,
    cost_usd: null,
    cost_budget: null,
    last_test: null,
    build: { step, elapsed_ms },
  };
}

describe('the status comment while the environment builds', () => {
  it('names a build from its first minute on, with the step it is at', () => {
    expect(progressStatus(building('Step 2/5 : RUN npm ci', 59_000)).detail).toBeUndefined();
    const long = renderStatus(
      'r1',
      'b'.repeat(40),
      progressStatus(building('Step 2/5 : RUN npm ci', 130_000)),
    );
    expect(long).toContain('### AgenticFix: ⏳ Building environment');
    expect(long).toContain('Building the test environment for 2 min: `Step 2/5 : RUN npm ci`');
  });
});

describe('untrusted text renders inert in every comment', () => {
  it('the checker sees what GitHub would render (the old evidence, a split table row, a mention)', () => {
    expect(problems('- `a`<img src=x>`b`')).toEqual(['HTML "<img src=x>"']);
    expect(problems('### Flags (1)\n\n- <!-- hidden')).toEqual(['HTML "<!-- hidden"']);
    expect(problems('<details><summary>x</summary>\n`<b>`\n</details>')).toContain('HTML "<b>"');
    expect(problems('| a | b |\n|---|---|\n| `x|y` | z |')).toEqual(['table row 2: 5 cells after 4']);
    expect(problems('cc @org/team and `@ok`')).toEqual(['mention " @org/team"']);
    expect(problems('```\n<img src=x>\n```\n\n``` `a` ```')).toEqual([]);
  });

  it.each(Object.keys(RENDERERS))('%s', (name) => {
    const render = RENDERERS[name]!;
    const failures: string[] = [];
    for (const h of HOSTILE) {
      const found = problems(render(h));
      if (found.length > 0)
        failures.push(`${JSON.stringify(h.slice(0, 60))}: ${found.slice(0, 3).join('; ')}`);
    }
    expect(failures.slice(0, 10)).toEqual([]);
  });

  it('a cut through a code block closes it before the cut and reopens it after', () => {
    const lines = Array.from(
      { length: 400 },
      (_, i) => `<img src=x onerror=alert(${i})> ${'`'.repeat(i % 5)}`,
    );
    const prose = Array.from({ length: 300 }, (_, i) => `line ${i}`).join('\n');
    // The block at the start, the end or the middle: the cut leaves its opener, its closer or both out.
    for (const md of [
      `${codeBlock(lines.join('\n'))}\n\n${prose}`,
      `${prose}\n\n${codeBlock(lines.join('\n'))}`,
      `${prose}\n\n${codeBlock(lines.join('\n'))}\n\n${prose}`,
    ])
      for (const max of [500, 2000, 8000]) {
        const cut = cutMiddle(md, max);
        expect(cut.note).not.toBeNull();
        expect(problems(cut.text)).toEqual([]);
        expect(problems(fitBody(md, max + 400))).toEqual([]);
      }
  });

  it('the untrusted text is still shown: a code span holds it exactly, on one line', () => {
    for (const h of HOSTILE) {
      const span = code(h, { cell: true });
      expect(stripSpans(span)).toBe('⟨code⟩');
      const f = /^`+/.exec(span)![0];
      const inner = span.slice(f.length, span.length - f.length);
      const shown = (
        inner.length > 2 && inner.startsWith(' ') && inner.endsWith(' ') ? inner.slice(1, -1) : inner
      ).replace(/\\\|/g, '|');
      expect(shown).toBe(h.replace(/\r\n?|\n/g, ' ') || ' ');
    }
  });

  it('titles are plain text: only their mentions are broken', () => {
    for (const h of HOSTILE) expect(prTitle({ number: 5, title: h })).not.toMatch(/@[A-Za-z0-9]/);
  });
});

/**
 * Issue 29: the run pages show everything a run holds (issue text, model output, tool calls and
 * observations, test names, the patch) as HTML. Every hostile string in every field: the only tags
 * are those of the page, the diff and Markdown renderers, none with an event handler or a script URL.
 */
describe('untrusted text renders inert on the run pages', () => {
  const TAGS = new Set(
    (
      'div h1 h2 h3 dl dt dd a code pre p section ol ul li span strong em time form input button table ' +
      'thead tbody tr th td caption details summary svg path label select option blockquote hr br del ' +
      'ins img h4 h5 h6 s nav'
    ).split(' '),
  );
  function tagProblems(page: string): string[] {
    const found: string[] = [];
    for (const m of page.matchAll(/<\/?([A-Za-z][\w-]*)([^>]*)>/g)) {
      const [tag, name, attrs] = [m[0], m[1]!.toLowerCase(), m[2] ?? ''];
      if (!TAGS.has(name)) found.push(`tag ${tag.slice(0, 120)}`);
      // Quoted values are the attribute's text (escaped: no quote can end them early).
      if (/\son\w+\s*=/i.test(attrs.replace(/"[^"]*"|'[^']*'/g, '""')))
        found.push(`handler ${tag.slice(0, 120)}`);
      // Issue 38, item 6: the CSP refuses inline styles (markdown tables' alignment had them).
      if (/\sstyle\s*=/i.test(attrs.replace(/"[^"]*"|'[^']*'/g, '""')))
        found.push(`inline style ${tag.slice(0, 120)}`);
      if (/(?:href|src)\s*=\s*"?\s*(?:javascript|data|vbscript):/i.test(attrs))
        found.push(`script URL ${tag.slice(0, 120)}`);
    }
    if (/<!--|<script|<style|<iframe/i.test(page)) found.push('comment, script, style or frame');
    return found;
  }
  const ev = (seq: number, type: string, body: Record<string, unknown>) => ({
    run_id: 'r1',
    seq,
    ts: '2026-01-01T00:00:00.000Z',
    type,
    body,
  });

  it('every field of a run, its events and its report, and the run list', () => {
    const failures: string[] = [];
    for (const h of HOSTILE.filter((_, i) => i % 3 === 0)) {
      const r = {
        ...result(h),
        patch: `diff --git a/${h} b/${h}\n--- a/${h}\n+++ b/${h}\n@@ -1 +1 @@\n-${h}\n+${h}\n`,
      };
      const record = run({
        owner: h,
        repo: h,
        issue_title: h,
        triggered_by: h,
        error: h,
        stop_reason: h,
        verdict: h,
        state: 'running',
        pushed_commit: h,
        pr_number: 3,
        created_at: '2026-01-01T00:00:00.000Z',
        started_at: '2026-01-01T00:00:00.000Z',
        finished_at: null,
        tokens: 5,
        attempts: JSON.stringify(hostileAttempts(h)),
      });
      const entries: AttemptEntry[] = [
        ...hostileAttempts(h).map((a) => ({ n: a.n, run_id: a.run_id, outcome: a })),
        { n: 3, run_id: 'r1-a3', outcome: null },
      ];
      const page = runBody({
        run: record,
        events: [
          ev(1, 'status', { phase: h, detail: h }),
          ev(2, 'repository_guidance', { path: h, chars: 3, cut: false }),
          ev(3, 'build_network', { log_tail: [h, h] }),
          ev(4, 'tool_start', { name: h, args: { path: h } }),
          ev(5, 'tool_end', {
            name: h,
            args: { path: h },
            result: { success: false, error_code: h, data: h },
            duration_ms: 1,
          }),
          ev(6, 'model_reply', { model: h, usage: { prompt: 1, completion: 1, cached: 0, total: 2 } }),
          ev(7, 'repair_result', { ...r }),
          ev(8, 'verification', { report: hostileReport(h) }),
          ev(9, 'tool_start', { name: h, args: { path: h } }),
        ],
        revisions: [record, { ...record, id: h, revision: 1 }],
        attempts: attemptsSection(entries),
        viewer: { writer: true, csrf: h },
        githubUrl: 'https://github.com',
      }).text;
      const list = runList([record], { repo: h, state: h }, [h], { page: 2, older: true }).text;
      // Issue 41: an attempt's page, among siblings recorded and one under way.
      const attemptPage = attemptBody({
        run: record,
        entry: entries[1]!,
        siblings: entries,
        events: [ev(1, 'tool_end', { name: h, args: { path: h }, result: { success: true, data: h } })],
        githubUrl: 'https://github.com',
      }).text;
      failures.push(
        ...[...tagProblems(page), ...tagProblems(list), ...tagProblems(attemptPage)].map(
          (p) => `${JSON.stringify(h.slice(0, 60))}: ${p}`,
        ),
      );
    }
    expect(failures).toEqual([]);
  });
});
