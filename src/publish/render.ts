import type { RepairResult } from '../agent/types.js';
import { priceNote, usd } from '../config/prices.js';
import { buildInfo } from '../config/version.js';
import type { Feedback } from '../store/feedback.js';
import type { RunRecord } from '../store/store.js';
import { withMarker } from '../trace/marker.js';
import type { VerificationReport } from '../verify/types.js';
import { code, codeBlock, inert } from '../verify/untrusted.js';

/** Markdown for everything the app posts. Pure functions; every body fits GitHub's limit. */
export const GITHUB_BODY_LIMIT = 65_536;
/** Head-room for the notes and wrappers added around cut content. */
const MARGIN = 600;

export interface Cut {
  text: string;
  /** What was removed, as a sentence; null when nothing was. */
  note: string | null;
}

/**
 * The code fence still open after each line (null where none): a cut inside a code block closes and
 * reopens it, or what follows it (untrusted content included) would render as Markdown and HTML.
 */
function fencesAfter(lines: readonly string[]): (string | null)[] {
  let open: string | null = null;
  return lines.map((l) => {
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(l);
    const f = m?.[1];
    if (f === undefined) return open;
    const rest = m?.[2] ?? '';
    if (open === null) open = f[0] === '`' && rest.includes('`') ? null : f;
    else if (f[0] === open[0] && f.length >= open.length && rest.trim() === '') open = null;
    return open;
  });
}

/**
 * Keeps the head and tail lines of `text` within `max` characters, cutting whole lines from the
 * middle; a code block cut in two is closed before the cut and reopened after it.
 */
export function cutMiddle(text: string, max: number, unit = 'lines'): Cut {
  if (text.length <= max) return { text, note: null };
  const lines = text.split('\n');
  const head: string[] = [];
  const tail: string[] = [];
  let used = 0;
  let i = 0;
  let j = lines.length - 1;
  // Alternate head and tail so both the start and the end of a log survive.
  while (i <= j) {
    const takeHead = head.length <= tail.length;
    const line = takeHead ? lines[i]! : lines[j]!;
    if (used + line.length + 1 > max) break;
    used += line.length + 1;
    if (takeHead) head.push(lines[i++]!);
    else tail.unshift(lines[j--]!);
  }
  const cutLines = lines.length - head.length - tail.length;
  const cutChars = text.length - used + (head.length + tail.length > 0 ? 1 : 0);
  const note = `${cutLines} of ${lines.length} ${unit} (${cutChars} characters) were cut from the middle to fit GitHub's ${GITHUB_BODY_LIMIT}-character limit.`;
  const open = fencesAfter(lines);
  const closeHead = head.length > 0 ? open[head.length - 1] : null;
  const reopenTail = open[lines.length - tail.length - 1] ?? null;
  return {
    text: [
      ...head,
      ...(closeHead ? [closeHead] : []),
      `… ${cutLines} ${unit} cut …`,
      ...(reopenTail ? [reopenTail] : []),
      ...tail,
    ].join('\n'),
    note,
  };
}

/** `<details>` block whose content is cut to `max` characters, with a note of what was cut. */
export function collapsed(summary: string, content: string, max: number, lang = ''): string {
  const cut = cutMiddle(content, Math.max(0, max - MARGIN));
  const note = cut.note ? `\n\n> [!NOTE]\n> ${cut.note}` : '';
  return `<details><summary>${summary}</summary>\n\n${codeBlock(cut.text, lang)}${note}\n\n</details>`;
}

/** Last resort for a body that is still too long (or that GitHub refused as too long): cut its tail. */
export function fitBody(body: string, max = GITHUB_BODY_LIMIT): string {
  if (body.length <= max) return body;
  const note = `\n\n> [!NOTE]\n> ${body.length - max + 200} characters were cut from the end of this comment to fit GitHub's limit.`;
  // Whole lines where there are lines: a code span cut in two would leave the rest of its line to render as HTML.
  let head = body.slice(0, max - note.length - 100);
  if (head.includes('\n')) head = head.slice(0, head.lastIndexOf('\n'));
  // Close an open code fence or <details> so the rest of the page renders.
  const open = fencesAfter(head.split('\n')).at(-1);
  if (open) head += `\n${open}`;
  if ((head.match(/<details>/g) ?? []).length > (head.match(/<\/details>/g) ?? []).length)
    head += '\n</details>';
  return head + note;
}

/** A run with its page's address when serve has a public one (runPageUrl). */
export type PageRun = RunRecord & { page?: string | null };
/** The app's version, the run (linked to its page), its base commit and the version of the issue it worked on. */
const runLine = (run: PageRun): string =>
  `AgenticFix ${buildInfo().version}, run ${run.page ? `[${code(run.id)}](${run.page})` : code(run.id)}, base commit ${code(run.base_commit.slice(0, 12))}` +
  (run.issue_updated_at ? `, issue #${run.issue} as of ${run.issue_updated_at}` : '');

export function prTitle(issue: { number: number; title: string }): string {
  const t = `Fix #${issue.number}: ${inert(issue.title, { plain: true })}`.replace(/\s+/g, ' ').trim();
  return t.length > 200 ? t.slice(0, 199) + '…' : t;
}

export function prBody(a: {
  issue: number;
  run: PageRun;
  result: RepairResult;
  report: VerificationReport;
  /** The pull request an earlier run opened for the issue, left as it is. */
  earlier?: number | null;
}): string {
  const summary = inert(a.result.summary?.trim() || 'The agent did not leave a summary.');
  const earlier = a.earlier
    ? `\n\nA new run from the current base; #${a.earlier}, opened earlier for the issue, is left as it is.`
    : '';
  const text = [
    `### Summary\n\n${cutMiddle(summary, 8000).text}`,
    `Fixes #${a.issue}${earlier}`,
    `### Verification\n\n**Verdict: \`${a.report.verdict}\`**: ${inert(a.report.reason)}`,
    `<sub>Opened by ${runLine(a.run)}. Evidence, trace and configuration are in the comments below.</sub>`,
  ].join('\n\n');
  return withMarker(fitBody(text, GITHUB_BODY_LIMIT - 200), { run: a.run.id, kind: 'pr' });
}

/** Said on an earlier pull request of the issue when a rerun opened another one instead of replacing its commits. */
export function supersededNote(run: PageRun, pr: number): string {
  return `AgenticFix run \`${run.id}\` (${run.trigger} by @${run.triggered_by}) opened #${pr} for the same issue from the current base. This pull request's branch was left as it is: the app never replaces commits it did not make in that run.`;
}

/** The judge's report (its test names and outputs come from model-written code) and the app's notes. */
export function evidenceComment(run: PageRun, markdown: string, notes: string[] = []): string {
  const head = [`## Test evidence\n\n<sub>${runLine(run)}</sub>`, ...notes, ''].join('\n\n');
  return head + cutMiddle(inert(markdown, { keepHtml: true }), GITHUB_BODY_LIMIT - head.length - MARGIN).text;
}

interface ToolEnd {
  name: string;
  args: unknown;
  ok: boolean;
  error: string | null;
  ms: number | null;
}

const oneLine = (v: unknown, max: number): string => {
  const s = (typeof v === 'string' ? v : (JSON.stringify(v) ?? '')).replace(/\s+/g, ' ');
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
};
/** App Markdown in a table cell: GitHub splits cells at every unescaped `|`, code spans included. */
const cell = (s: string): string => s.replace(/\|/g, '\\|');

/** Reads the event log (JSON lines); lines that are not JSON objects are skipped. */
function parseEvents(jsonl: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of jsonl.split('\n')) {
    if (!line.trim()) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (v && typeof v === 'object' && !Array.isArray(v)) out.push(v as Record<string, unknown>);
    } catch {
      // a torn last line after a crash: the raw log below still shows it
    }
  }
  return out;
}

/** Phases in the order they ran; the agent's time split by the tools that take the wall clock. */
function phaseLine(phases: Record<string, number>, tools: ToolEnd[]): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const byTool = new Map<string, number>();
  for (const c of tools) if (c.ms) byTool.set(c.name, (byTool.get(c.name) ?? 0) + c.ms);
  const heavy = [...byTool]
    .filter(([, ms]) => ms >= 100)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${code(name)} ${s(ms)}`);
  return Object.entries(phases)
    .map(
      ([name, ms]) =>
        `${name} ${s(ms)}${name === 'agent' && heavy.length > 0 ? ` (${heavy.join(', ')})` : ''}`,
    )
    .join(' · ');
}

export function traceComment(run: PageRun, result: RepairResult, eventsJsonl: string): string {
  const events = parseEvents(eventsJsonl);
  const tools: ToolEnd[] = events
    .filter((e) => e.type === 'tool_end')
    .map((e) => {
      const r = (e.result ?? {}) as { success?: unknown; error_code?: unknown };
      return {
        name: String(e.name ?? '?'),
        args: e.args,
        ok: r.success === true,
        error: typeof r.error_code === 'string' ? r.error_code : null,
        ms: typeof e.duration_ms === 'number' ? e.duration_ms : null,
      };
    });
  const requests = events
    .filter((e) => e.type === 'model_reply')
    .map((e) => ({ u: (e.usage ?? {}) as Record<string, unknown>, cost: e.cost_usd }));
  const t = result.tokens;
  const parts = [
    `## Trace summary\n\n<sub>${runLine(run)}</sub>`,
    [
      `- Stop reason: \`${result.stop_reason}\`${result.error ? ` (${inert(oneLine(result.error, 300))})` : ''}`,
      `- Duration: ${(result.duration_ms / 1000).toFixed(1)} s; ${result.requests} model requests, ${result.tool_calls} tool calls`,
      `- Tokens: ${t.total} total (${t.prompt} prompt, ${t.completion} completion, ${t.cached} cached)`,
      `- Cost: ${usd(result.cost_usd)}${priceNote(events.find((e) => e.type === 'model')?.price)}`,
      `- Time by phase: ${phaseLine(result.phases_ms, tools)}`,
    ].join('\n'),
  ];
  if (tools.length > 0) {
    const rows = tools
      .slice(0, 150)
      .map(
        (c, i) =>
          `| ${i + 1} | ${code(c.name, { cell: true })} | ${code(oneLine(c.args, 120), { cell: true })} | ${c.ok ? 'ok' : `failed${c.error ? ` (${code(c.error, { cell: true })})` : ''}`} | ${c.ms ?? ''} |`,
      );
    const more =
      tools.length > 150 ? `\n\n${tools.length - 150} more tool calls are in the event log below.` : '';
    parts.push(
      `### Tool calls\n\n| # | Tool | Arguments | Outcome | ms |\n|---|---|---|---|---|\n${rows.join('\n')}${more}`,
    );
  }
  if (requests.length > 0) {
    const rows = requests
      .slice(0, 100)
      .map(
        ({ u, cost }, i) =>
          `| ${i + 1} | ${u.prompt_tokens ?? u.prompt ?? ''} | ${u.cached ?? ''} | ${u.completion_tokens ?? u.completion ?? ''} | ${u.total_tokens ?? u.total ?? ''} | ${usd(cost)} |`,
      );
    parts.push(
      `### Tokens and cost per request\n\n| # | Prompt | Cached | Completion | Total | Cost |\n|---|---|---|---|---|---|\n${rows.join('\n')}`,
    );
  }
  const head = parts.join('\n\n') + '\n\n';
  const log = collapsed(
    `Full event log (${events.length} events)`,
    eventsJsonl,
    GITHUB_BODY_LIMIT - head.length - MARGIN,
    'jsonl',
  );
  return fitBody(head + log);
}

export function configComment(a: {
  run: PageRun;
  result: RepairResult;
  model: string;
  budgets: Record<string, number | null>;
  testArgv: string[];
  dockerfileSource: string;
  /** Whether builds went through a proxy or trusted an extra CA (never their values). */
  buildNetwork: { proxy: boolean; ca: boolean };
}): string {
  const yes = (b: boolean) => (b ? 'yes' : 'no');
  const budgets = Object.entries(a.budgets)
    .map(([k, v]) => `${k}=${v ?? 'none'}`)
    .join(', ');
  const body = [
    `## Run configuration\n\n<sub>${runLine(a.run)}</sub>`,
    [
      `- Model: ${code(a.result.model_name ?? a.model)}${a.run.model ? ' (set by the rerun command)' : ''}`,
      `- Prompt version: ${code(a.result.prompt_hash)}`,
      `- Budgets: ${budgets}`,
      `- Test command: ${code(a.testArgv.join(' '))}`,
      `- Environment: ${a.dockerfileSource}; image ${code(a.result.image_id ?? 'none')}`,
      `- Build network: proxy ${yes(a.buildNetwork.proxy)}, extra CA ${yes(a.buildNetwork.ca)}`,
      `- Triggered by ${login(a.run.triggered_by)} (${code(a.run.trigger)})`,
    ].join('\n'),
  ];
  if (a.result.dockerfile) body.push(collapsed('Dockerfile', a.result.dockerfile, 20_000, 'dockerfile'));
  return fitBody(body.join('\n\n'));
}

/** A GitHub user, @-mentioned only when the name is a login (so it can name no team and hold no markup). */
const login = (name: string): string => (/^[A-Za-z0-9-]+(\[bot\])?$/.test(name) ? `@${name}` : code(name));

/** Who asked for a revision and how, in words (a CI app is named, never @-mentioned). */
export function revisionAsker(run: Pick<RunRecord, 'trigger' | 'triggered_by'>): string {
  const who = login(run.triggered_by);
  switch (run.trigger) {
    case 'review':
      return `${who} in a review`;
    case 'mention':
      return `${who} in a review comment`;
    case 'checks':
      return `failing checks (${code(run.triggered_by)})`;
    default:
      return `${who} with ${code(`/agenticfix ${run.trigger}`)}`;
  }
}

/**
 * What a revision's evidence says about feedback kept from the model: review comments of people without
 * write access (counted), failing check runs not from the suite that triggered it (named, with why).
 */
export function feedbackNotes(f: Feedback | null): string[] {
  if (f?.kind === 'review' && f.left_out > 0)
    return [
      `${f.left_out} earlier review comment${f.left_out === 1 ? '' : 's'} by people without write access ${f.left_out === 1 ? 'was' : 'were'} left out of the model's prompt: only writers' words reach it.`,
    ];
  if (f?.kind !== 'checks') return [];
  const named = f.ignored.map((c) => `- ${code(c.name)} (${code(c.app)}): ${c.why}`);
  if (f.ignored_more) named.push(`- and ${f.ignored_more} more runs on the commit, not named or not read`);
  const notes = named.length ? [[IGNORED, ...named].join('\n')] : [];
  if (f.left_out) notes.unshift(`${f.left_out} more check runs of the suite were not shown to the model.`);
  return notes;
}
const IGNORED = 'Failing check runs on the same commit that were ignored (never shown to the model):';

/** The evidence of a published revision: headed "Revision N", naming the commit it pushed. */
export function revisionComment(
  run: PageRun,
  commit: string,
  parent: string,
  markdown: string,
  notes: string[] = [],
): string {
  const rebased =
    parent === run.head_commit
      ? ''
      : ` (the branch moved during the revision: rebased from \`${(run.head_commit ?? '').slice(0, 12)}\`)`;
  const head = [
    `## Revision ${run.revision}\n\nCommit ${commit} on top of \`${parent.slice(0, 12)}\`${rebased}, asked for by ${revisionAsker(run)}. The judge verified the pull request's whole change against the base.\n\n<sub>${runLine(run)}</sub>`,
    ...notes,
    '',
  ].join('\n\n');
  return head + cutMiddle(inert(markdown, { keepHtml: true }), GITHUB_BODY_LIMIT - head.length - MARGIN).text;
}

/**
 * The pull request description's list of pushed revisions, oldest first, so the description says what
 * the branch holds now (each revision's evidence is in its comment).
 */
export function revisionsSection(revisions: readonly RunRecord[]): string {
  const rows = revisions.map(
    (r) =>
      `| ${r.revision} | \`${(r.pushed_commit ?? '').slice(0, 12)}\` | ${cell(revisionAsker(r))} | \`${r.verdict ?? '?'}\` | ${usd(r.cost_usd)} | \`${r.id}\` |`,
  );
  return [
    '### Revisions',
    'The branch has been revised since this description was written; the judge verified the whole change against the base after each revision (evidence in each revision comment).',
    ['| # | commit | asked for by | verdict | cost | run |', '|---|---|---|---|---|---|', ...rows].join('\n'),
  ].join('\n\n');
}

/** The issue comment for any result that is not published as a pull request. */
export function unverifiedComment(a: {
  run: PageRun;
  result: RepairResult;
  /** Null when the patch never reached the judge (a revision stopped before it). */
  report: VerificationReport | null;
  evidence: string;
  why?: string;
  notes?: string[];
}): string {
  const head = [
    a.run.revision === null
      ? `## AgenticFix: no pull request`
      : `## Revision ${a.run.revision}: nothing pushed`,
    a.report ? `**Verdict: \`${a.report.verdict}\`**: ${inert(a.report.reason)}` : '**Not verified.**',
    a.why ??
      (a.run.revision === null
        ? 'Only verified patches are published as pull requests.'
        : 'Only a verified revision is pushed; the branch is unchanged.'),
    ...(a.notes ?? []),
    `<sub>${runLine(a.run)}; stop reason \`${a.result.stop_reason}\`; cost ${usd(a.result.cost_usd)}.</sub>`,
  ].join('\n\n');
  const room = GITHUB_BODY_LIMIT - head.length - 2 * MARGIN;
  const evidence = cutMiddle(inert(a.evidence, { keepHtml: true }), Math.floor(room / 2)).text;
  const patch = a.result.patch
    ? collapsed('Candidate patch', a.result.patch, room - evidence.length, 'diff')
    : '_The run produced no patch._';
  return fitBody(a.report ? `${head}\n\n### Evidence\n\n${evidence}\n\n${patch}` : `${head}\n\n${patch}`);
}

const fileList = (files: string[]): string => files.map((f) => code(f)).join(', ');

export function blockedPathsNote(files: string[]): string {
  return `The patch changes ${fileList(files)}, which the app never pushes: workflow files need a permission the app does not hold by design, and the repository's \`protected_paths\` are off limits. A maintainer can apply the patch below by hand after review.`;
}

/** The evidence's warning for a published patch that changes CI entry points (`ci_entry_points: flag`). */
export function ciFlagNote(files: string[]): string {
  return `> [!WARNING]\n> This patch changes CI entry points: ${fileList(files)}. The branch lives in this repository, so workflows it triggers run these files with the repository's secrets. Review them before approving or re-running workflows for this pull request.`;
}

/** Why a patch that changes CI entry points was not pushed (`ci_entry_points: block`). */
export function ciBlockedNote(files: string[]): string {
  return `The patch changes CI entry points (${fileList(files)}) and this repository's \`ci_entry_points\` policy is \`block\`: a push would run them in CI with the repository's secrets. A maintainer can apply the patch below by hand after review.`;
}
