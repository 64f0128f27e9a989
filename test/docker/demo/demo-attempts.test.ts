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
 * built CLI (dist/); the three attempts share one environment image (one Dockerfile). With `--models`
 * (repository `models`) the attempts take the two models in turn, and the JSON names each one's model.
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
      expect(s.attempts).toEqual([
        {
          n: 1,
          run_id: `${s.run_id}-a1`,
          model: 'scripted-a',
          verdict: 'regression',
          changed_lines: 2,
          published: false,
          cost_usd: expect.any(Number),
        },
        {
          n: 2,
          run_id: `${s.run_id}-a2`,
          model: 'scripted-b',
          verdict: 'verified',
          changed_lines: 4,
          published: false,
          cost_usd: expect.any(Number),
        },
        {
          n: 3,
          run_id: `${s.run_id}-a3`,
          model: 'scripted-a',
          verdict: 'verified',
          changed_lines: 3,
          published: true,
          cost_usd: expect.any(Number),
        },
      ]);
      // The pull request carries the published attempt's patch: the fix without the extra comment.
      const patch = readFileSync(s.patch_path, 'utf8');
      expect(s.patch_path).toContain(`${s.run_id}-a3`);
      expect(patch).toContain('+  return a - b;');
      expect(patch).not.toContain('Dividing by zero is refused');
      const evidence = s.comments.find((c) => c.on === 'pr' && c.body.startsWith('## Test evidence'))!.body;
      expect(evidence.split('\n').filter((l) => /^\| \d/.test(l))).toHaveLength(3);
      expect(evidence).toMatch(
        /\| 3 \(published\) \| `verified` \| `scripted-a` \| 2 \| 3 \| 3 lines, 1 files \|/,
      );
      // One status comment on the issue, a line per attempt; one pull request.
      const issue = s.comments.filter((c) => c.on === 'issue');
      expect(issue).toHaveLength(1);
      expect(issue[0]!.body.match(/^- Attempt \d/gm)).toHaveLength(3);
      expect(s.pr!.number).toBeGreaterThan(0);
      // One image for the three attempts: the second and third reuse the first one's build.
      const builds = s.attempts.map((a) =>
        readFileSync(path.join(dir, 'runs', a.run_id, 'events.jsonl'), 'utf8').includes('"cache_hit":true'),
      );
      expect(builds.slice(1)).toEqual([true, true]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
