import type { CheckRun, Feedback, ReviewComment } from '../store/feedback.js';
import type { RunRecord, RunStore } from '../store/store.js';
import { capMiddle } from '../trace/cap.js';

/** What a revision's model is told besides the issue: the change so far and the feedback on it. */

const MAX_DIFF_CHARS = 40_000;

const EVENTS_PAGE = 500;

/**
 * The model's summary of the latest earlier run on the pull request that left one, from the run store's
 * events (its `repair_result`): any worker may have run it, so its run directory may be on another disk.
 */
export async function previousSummary(
  store: Pick<RunStore, 'events'>,
  earlier: RunRecord[],
): Promise<string | null> {
  for (const run of earlier) {
    for (let after = 0; ;) {
      const page = await store.events(run.id, after, EVENTS_PAGE);
      const repaired = page.find((e) => e.type === 'repair_result');
      if (repaired) {
        const summary = repaired.body.summary;
        if (typeof summary === 'string' && summary.trim()) return summary.trim();
        break;
      }
      if (page.length < EVENTS_PAGE) break;
      after = page.at(-1)!.seq;
    }
  }
  return null;
}

/** The feedback as the model reads it: review comments with their place in the diff. */
export function feedbackText(f: Feedback): string {
  if (f.kind === 'command') return `@${f.user} asked (\`/agenticfix revise\`):\n${f.text}`;
  if (f.kind === 'mention') return `@${f.user} asked in a review comment.\n\n${commentText(f.comment)}`;
  if (f.kind === 'checks')
    return [
      `The pull request's checks failed on ${f.head_sha}:`,
      ...f.runs.map(checkText),
      ...(f.left_out > 0 ? [`(${f.left_out} more check runs of the suite are not shown.)`] : []),
    ].join('\n\n');
  const lines = [`@${f.user} requested changes in a review.`];
  if (f.body.trim()) lines.push(`Review summary:\n${f.body.trim()}`);
  lines.push(...f.comments.map(commentText));
  if (f.threads.length > 0)
    lines.push('Earlier review threads on the pull request:', ...f.threads.map(commentText));
  return lines.join('\n\n');
}

function commentText(c: ReviewComment): string {
  const where = c.line === null ? `${c.path} (outdated: the code changed since)` : `${c.path}:${c.line}`;
  const resolved = c.resolved ? ' (thread resolved: already settled, for context only)' : '';
  return `Comment by @${c.user} on ${where}${resolved}:\n\`\`\`diff\n${c.diff_hunk}\n\`\`\`\n${c.body}`;
}

function checkText(r: CheckRun): string {
  const notes = r.annotations.map((a) => `- ${a.path}:${a.line}: ${a.message}`);
  return [
    `Check "${r.name}" (${r.conclusion}): ${r.summary}`,
    ...(notes.length ? ['Annotations:', ...notes] : []),
    ...(r.output_tail ? [`End of its output:\n\`\`\`\n${r.output_tail}\n\`\`\``] : []),
  ].join('\n');
}

/** The inline review threads a published revision answers (outdated or resolved ones are not asks). */
export function addressedThreads(f: Feedback | null): ReviewComment[] {
  if (f?.kind === 'review') return f.comments.filter((c) => !c.outdated && !c.resolved);
  if (f?.kind === 'mention') return [f.comment];
  return [];
}

export function revisionContext(a: {
  revision: number;
  pr: number;
  summary: string | null;
  diff: string;
  feedback: Feedback;
}): string {
  return [
    `Revision ${a.revision} of pull request #${a.pr}.`,
    `Summary of the previous run: ${a.summary ?? '(none)'}`,
    `The pull request's change against the original base (git diff):\n\`\`\`diff\n${capMiddle(a.diff, MAX_DIFF_CHARS / 2)}\n\`\`\``,
    `Feedback:\n${feedbackText(a.feedback)}`,
  ].join('\n\n');
}
