import type { VerificationReport } from './types.js';
import { code, codeBlock, inert } from './untrusted.js';

/** GitHub rejects comments above 65,536 characters; keep a margin. */
export const MARKDOWN_LIMIT = 60_000;
const ITEM_CHARS = 240;
const INLINE_ITEMS = 10;

/** Test names, file names and flags (written by the patch or its tests): each one a code span. */
const item = (s: string) => code(s.length > ITEM_CHARS ? `${s.slice(0, ITEM_CHARS)}…` : s);
/** Prose that quotes untrusted text (the verdict's reason, a cell's problem): inert, one paragraph, capped. */
const prose = (s: string, max: number) =>
  inert(s.length > max ? `${s.slice(0, max)}…` : s).replace(/\s*\n\s*/g, ' ');
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** A bulleted list: the first items inline, up to `hidden` more inside <details>, and a count of the rest. */
function list(
  title: string,
  items: readonly string[],
  hidden: number,
  format: (s: string) => string = item,
): string {
  if (items.length === 0) return '';
  const bullets = (xs: readonly string[]) => xs.map((x) => `- ${format(x)}`).join('\n');
  const parts = [`### ${title} (${items.length})`, bullets(items.slice(0, INLINE_ITEMS))];
  const rest = items.slice(INLINE_ITEMS);
  if (rest.length > 0) {
    const shown = rest.slice(0, hidden);
    const cut = rest.length - shown.length;
    const inner = [
      shown.length > 0 ? bullets(shown) : '',
      cut > 0 ? `\n_${cut} more not shown (see the JSON report)._` : '',
    ].join('');
    parts.push(`<details><summary>${rest.length} more</summary>\n\n${inner}\n\n</details>`);
  }
  return parts.join('\n\n');
}

/** The report's blocks, each one whole Markdown (a cut between blocks splits no code span or block). */
function render(r: VerificationReport, hidden: number): string[] {
  const out: string[] = [];
  out.push(`## AgenticFix verification: \`${r.verdict}\``, prose(r.reason, 4000));
  out.push(
    `Base commit \`${r.base_commit.slice(0, 12)}\` · ${r.mode} mode · per-test results: ${r.per_test ? 'yes' : 'no (exit codes only)'} · total ${secs(r.duration_ms)}`,
  );
  if (r.cells.length > 0) {
    const rows = r.cells.map(
      (c) =>
        `| ${c.name} | ${c.source} | ${c.tests} | ${c.counts.passed} | ${c.counts.failed} | ${c.counts.errors} | ${c.counts.skipped} | ${c.exit_code ?? c.status} | ${c.runs} | ${secs(c.duration_ms)} |`,
    );
    out.push(
      [
        '| Cell | Source | Tests | Passed | Failed | Errors | Skipped | Exit | Runs | Time |',
        '|---|---|---|---:|---:|---:|---:|---:|---:|---:|',
        ...rows,
      ].join('\n'),
    );
    const problems = r.cells.filter((c) => c.problem).map((c) => `${c.name}: ${c.problem}`);
    out.push(list('Untrustworthy runs', problems, hidden, (p) => prose(p, 1000)));
  }
  if (r.task) {
    const t = r.task;
    out.push(
      `**Task ${code(t.instance_id)}: ${t.resolved ? 'resolved' : 'unresolved'}** · FAIL_TO_PASS ${t.FAIL_TO_PASS.success.length}/${t.FAIL_TO_PASS.success.length + t.FAIL_TO_PASS.failure.length} · PASS_TO_PASS ${t.PASS_TO_PASS.success.length}/${t.PASS_TO_PASS.success.length + t.PASS_TO_PASS.failure.length}`,
    );
    out.push(list('FAIL_TO_PASS still failing', t.FAIL_TO_PASS.failure, hidden));
    out.push(list('PASS_TO_PASS broken', t.PASS_TO_PASS.failure, hidden));
    out.push(
      list(
        'Missing from the report (not graded)',
        [...t.FAIL_TO_PASS.missing, ...t.PASS_TO_PASS.missing],
        hidden,
      ),
    );
  }
  const e = r.evidence;
  out.push(list('Tests that flipped (fail on base, pass with the patch)', e.reproduced, hidden));
  out.push(list('Regressions', e.regressions, hidden));
  out.push(list("The patch's own tests failing with the patch", e.new_tests_failing, hidden));
  out.push(list('Failing before and after (not blamed on the patch)', e.fail_both, hidden));
  out.push(list('Flaky (excluded from the evidence)', e.flaky, hidden));
  out.push(list('Tests modified', r.tests_modified, hidden));
  out.push(list('Flags', r.flags, hidden));
  if (r.image) {
    out.push(
      `**Environment:** image ${code(r.image.id)}${r.image.tag ? ` (${code(r.image.tag)})` : ''}, ${r.image.reused ? 'reused (same content key)' : r.image.no_cache ? 'rebuilt without cache' : 'built with the layer cache'} in ${secs(r.image.build_ms)}; Dockerfile sha256 \`${r.image.dockerfile_sha256.slice(0, 16)}\`.`,
    );
  }
  if (r.phases)
    out.push(
      `**Judge timings:** worktrees ${secs(r.phases.worktrees_ms)}, image ${secs(r.phases.build_ms)}, test cells ${secs(r.phases.cells_ms)} (wall time, ${r.phases.cells_at_once} at a time, ${r.phases.cell_limit_s} s limit each).`,
    );
  if (r.build_error)
    out.push(
      `<details><summary>Build error</summary>\n\n${codeBlock(r.build_error.slice(0, 4000))}\n\n</details>`,
    );
  if (r.commands.length > 0) {
    const cmds = r.commands.slice(0, 40).map((c) => c.slice(0, 500).replace(/\r\n?|\n/g, ' '));
    out.push(
      `<details><summary>Commands (${r.commands.length})</summary>\n\n${codeBlock(cmds.join('\n'))}\n\n</details>`,
    );
  }
  return out.filter(Boolean);
}

/**
 * The evidence report as Markdown for a pull-request comment. Long lists are cut inside <details>
 * blocks with a count of what was cut, shrinking until the comment fits in MARKDOWN_LIMIT.
 */
export function renderMarkdown(report: VerificationReport): string {
  for (const hidden of [200, 50, 10, 0]) {
    const md = render(report, hidden).join('\n\n') + '\n';
    if (md.length <= MARKDOWN_LIMIT) return md;
  }
  const note = '_Report cut to fit a comment; see the JSON report._';
  const kept: string[] = [];
  let used = note.length + 3;
  for (const block of render(report, 0)) {
    if (used + block.length + 2 > MARKDOWN_LIMIT) break;
    kept.push(block);
    used += block.length + 2;
  }
  return [...kept, note].join('\n\n') + '\n';
}
