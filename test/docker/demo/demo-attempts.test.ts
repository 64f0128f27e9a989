import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { DEMO_ENV } from '../../support/demo.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/**
 * Issue 41's Done-when: `agenticfix demo --attempts 3 --json` (scripted: one attempt breaks add, two
 * fix the bugs with patches of different sizes) opens one draft pull request with the smaller verified
 * patch, its evidence comment has a table of three attempts, and the JSON lists each attempt. Runs the
 * built CLI (dist/); the attempts run side by side (the default two slots) and share one environment
 * image (one Dockerfile), built once. With `--models` (repository `models`) the attempts take the two
 * models in turn, and the JSON names each one's model.
 */
describeIf(await needDocker())('demo --attempts 3', () => {
  it('publishes the smaller of two verified patches, with a table of three attempts', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'demo-attempts-'));
    try {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [
          path.resolve('dist/cli/index.js'),
          ...['demo', '--attempts', '3', '--models', 'scripted-a,scripted-b', '--json'],
        ],
        {
          cwd: dir, // No flaky re-runs of failing judge cells: three attempts are judged, and CI time is shared.
          env: {
            ...process.env,
            ...DEMO_ENV,
            AGENTICFIX_FLAKY_RERUNS: '0',
            AGENTICFIX_CONCURRENCY: '2', // two attempts side by side
          },
        },
      );
      const s = JSON.parse(stdout) as {
        result: string;
        error: string | null;
        run_id: string;
        patch_path: string;
        pr: { draft: boolean; number: number } | null;
        attempts: {
          n: number;
          run_id: string;
          model: string | null;
          verdict: string;
          changed_lines: number;
          published: boolean;
          cost_usd: number;
        }[];
        comments: { on: string; body: string }[];
      };
      expect(s.error).toBeNull();
      expect(s).toMatchObject({ result: 'success', pr: { draft: true } });
      // Attempt n takes the models in turn; the scripts go to the attempts in the order they start
      // (side by side, in the queue's two slots): one breaks add, two fix the bugs.
      expect(s.attempts.map((a) => [a.n, a.run_id, a.model])).toEqual([
        [1, `${s.run_id}-a1`, 'scripted-a'],
        [2, `${s.run_id}-a2`, 'scripted-b'],
        [3, `${s.run_id}-a3`, 'scripted-a'],
      ]);
      expect(s.attempts.map((a) => [a.verdict, a.changed_lines, a.published]).sort()).toEqual([
        ['regression', 2, false],
        ['verified', 3, true],
        ['verified', 4, false],
      ]);
      for (const a of s.attempts) expect(a.cost_usd).toEqual(expect.any(Number));
      // The pull request carries the published attempt's patch: the fix without the extra comment.
      const published = s.attempts.find((a) => a.published)!;
      const patch = readFileSync(s.patch_path, 'utf8');
      expect(s.patch_path).toContain(published.run_id);
      expect(patch).toContain('+  return a - b;');
      expect(patch).not.toContain('Dividing by zero is refused');
      const evidence = s.comments.find((c) => c.on === 'pr' && c.body.startsWith('## Test evidence'))!.body;
      expect(evidence.split('\n').filter((l) => /^\| \d/.test(l))).toHaveLength(3);
      expect(evidence).toContain(
        `| ${published.n} (published) | \`verified\` | \`${published.model}\` | 2 | 3 | 3 lines, 1 files |`,
      );
      // One status comment on the issue, a line per attempt; one pull request.
      const issue = s.comments.filter((c) => c.on === 'issue');
      expect(issue).toHaveLength(1);
      expect(issue[0]!.body.match(/^- Attempt \d/gm)).toHaveLength(3);
      expect(s.pr!.number).toBeGreaterThan(0);
      // One image for the three attempts: built at most once (the two asking for it at once take
      // turns; an engine that has it already builds none), the others take it from the cache.
      const builds = s.attempts.map((a) =>
        readFileSync(path.join(dir, 'runs', a.run_id, 'events.jsonl'), 'utf8').includes('"cache_hit":true'),
      );
      expect(builds.filter((hit) => !hit).length).toBeLessThanOrEqual(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
