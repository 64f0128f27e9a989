import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { addressedThreads, previousSummary, revisionContext } from '../src/revision/prompt.js';
import type { Feedback } from '../src/store/feedback.js';
import type { RunRecord } from '../src/store/store.js';
import { tempDir } from './support/app.js';

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
  it('takes the summary of the latest earlier run that left one', () => {
    const dir = tempDir('revision-context-');
    try {
      const runDir = (name: string, summary?: string) => {
        const d = path.join(dir, name);
        mkdirSync(d);
        if (summary !== undefined) writeFileSync(path.join(d, 'result.json'), JSON.stringify({ summary }));
        return d;
      };
      const torn = runDir('torn');
      writeFileSync(path.join(torn, 'result.json'), '{"summary": "cut sh');
      const runs = [
        { run_dir: runDir('no-result') },
        { run_dir: runDir('blank', '  ') },
        { run_dir: torn },
        { run_dir: null },
        { run_dir: runDir('first', 'Fixed add.') },
        { run_dir: runDir('older', 'Older.') },
      ] as RunRecord[];
      expect(previousSummary(runs)).toBe('Fixed add.');
      expect(previousSummary([])).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
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
        ignored: [{ name: 'lint', app: 'evil-ci', why: 'its app is not an allowed check app' }],
      },
    });
    expect(text).toContain('Summary of the previous run: (none)');
    expect(text).toContain("The pull request's checks failed on abc:");
    expect(text).toContain(
      'Check "unit" (failure): 1 failed\nAnnotations:\n- calc.py:3: boom\nEnd of its output:\n```\nAssertionError\n```',
    );
  });
});
