import { addressedThreads, previousSummary, revisionContext } from '../../../src/revision/prompt.js';
import type { Feedback } from '../../../src/store/feedback.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';

/** What a revision's model is told besides the issue. */

const comment = (
  id: number,
  over: Partial<Extract<Feedback, { kind: 'review' }>['comments'][number]> = {},
) => ({
  id,
  path: 'calc.py',
  line: 2,
  diff_hunk: '@@ -1,2 +1,2 @@\n def add(a, b):\n+    return a + b',
  body: `comment ${id}`,
  user: 'maint',
  outdated: false,
  resolved: false,
  ...over,
});

describe('revision context', () => {
  // Read from the run store, not from a run directory: with workers, the earlier run's disk is elsewhere.
  it('takes the summary of the latest earlier run that left one, from the run store', async () => {
    const store = new SqliteRunStore(':memory:');
    try {
      const run = async (n: number, events: { type: string; body: Record<string, unknown> }[]) => {
        const r = await store.createRun({
          owner: 'o',
          repo: 'r',
          issue: 1,
          installation_id: 1,
          trigger: 'label',
          triggered_by: 'u',
          delivery_id: `d${n}`,
          base_commit: 'a'.repeat(40),
        });
        await store.appendEvents(
          r.id,
          events.map((e) => ({ ts: new Date().toISOString(), ...e })),
        );
        return { ...r, run_dir: '/nowhere/on/this/disk' };
      };
      const result = (summary: unknown) => ({ type: 'repair_result', body: { summary } });
      const filler = Array.from({ length: 1200 }, (_, i) => ({ type: 'tool_call', body: { i } }));
      const runs = [
        await run(1, []),
        await run(2, [result('  ')]),
        await run(3, [result(null)]),
        await run(4, [...filler, result('Fixed add.')]), // past the first pages of events
        await run(5, [result('Older.')]),
      ];
      expect(await previousSummary(store, runs)).toBe('Fixed add.');
      expect(await previousSummary(store, [])).toBeNull();
    } finally {
      await store.close();
    }
  });

  it('gives the diff so far and the review with places, hunks and marks; replies go only to open, current threads', () => {
    const feedback: Feedback = {
      kind: 'review',
      user: 'maint',
      review_id: 9,
      body: 'Close.',
      comments: [comment(1), comment(2, { line: null, outdated: true }), comment(3, { resolved: true })],
      threads: [comment(4, { resolved: true, body: 'old nit' })],
      left_out: 0,
    };
    const text = revisionContext({ revision: 2, pr: 7, summary: 'Fixed add.', diff: '+x\n', feedback });
    expect(text).toContain('Revision 2 of pull request #7.');
    expect(text).toContain('Summary of the previous run: Fixed add.');
    expect(text).toContain('```diff\n+x\n\n```');
    expect(text).toContain('Review summary:\nClose.');
    expect(text).toContain('Comment by @maint on calc.py:2:\n```diff\n@@ -1,2 +1,2 @@');
    expect(text).toContain('Comment by @maint on calc.py (outdated: the code changed since):');
    expect(text).toContain('Earlier review threads on the pull request:');
    expect(text).toMatch(/calc\.py:2 \(thread resolved[^\n]*\n```diff[\s\S]*old nit/);
    expect(addressedThreads(feedback).map((c) => c.id)).toEqual([1]);
    expect(addressedThreads({ kind: 'command', user: 'maint', text: 'x' })).toEqual([]);
  });

  it('gives failing checks with their annotations and output tail', () => {
    const text = revisionContext({
      revision: 1,
      pr: 7,
      summary: null,
      diff: '',
      feedback: {
        kind: 'checks',
        user: 'github-actions',
        head_sha: 'abc',
        runs: [
          {
            id: 1,
            name: 'unit',
            conclusion: 'failure',
            summary: '1 failed',
            annotations: [{ path: 'calc.py', line: 3, message: 'boom' }],
            output_tail: 'AssertionError',
          },
        ],
        left_out: 0,
        ignored: [{ name: 'lint', app: 'evil-ci', why: 'its app is not an allowed check app' }],
        ignored_more: 0,
      },
    });
    expect(text).toContain('Summary of the previous run: (none)');
    expect(text).toContain("The pull request's checks failed on abc:");
    expect(text).toContain(
      'Check "unit" (failure): 1 failed\nAnnotations:\n- calc.py:3: boom\nEnd of its output:\n```\nAssertionError\n```',
    );
  });
});
