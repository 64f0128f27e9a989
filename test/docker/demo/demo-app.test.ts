import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runFigures } from '../../../src/bench/demo-wall.js';
import { runAppDemo } from '../../../src/demo/app.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { demoSetup } from '../../support/demo.js';

describeIf(await needDocker())(
  'demo: label → verified draft PR, through the emulator, the real app, the scripted model and Docker',
  () => {
    it('opens a draft PR with the evidence and reports the calculator numbers', async () => {
      const s = await runAppDemo({ ...demoSetup('demo-app-'), model: 'scripted', log: () => {} });
      expect(s.error).toBeNull();
      expect(s).toMatchObject({
        result: 'success',
        verdict: 'verified',
        stop_reason: 'completed',
        base_tests: { passed: 3, failed: 2 },
        after_tests: { passed: 5, failed: 0 },
        verify_tests: { passed: 5, failed: 0 },
        pr: { draft: true },
      });
      expect(s.pr!.head).toMatch(/^agenticfix\/issue-\d+$/);
      expect(readFileSync(s.patch_path!, 'utf8')).toContain('+  return a - b;');
      expect(readFileSync(s.trace_path!, 'utf8')).toContain('"build_environment"');
      const prComments = s.comments.filter((c) => c.on === 'pr').map((c) => c.body);
      expect(prComments.some((b) => b.includes('verified') && b.includes('| base'))).toBe(true);
      expect(s.comments.some((c) => c.on === 'issue')).toBe(true);
      // `demo --json` prints this summary: the run's cost at the scripted model's made-up price.
      expect(s.cost_usd).toBeGreaterThan(0);
      expect(JSON.parse(JSON.stringify(s))).toMatchObject({ cost_usd: s.cost_usd });
      const trace = prComments.find((b) => b.startsWith('## Trace summary'))!;
      expect(trace).toContain(
        `- Cost: $${s.cost_usd!.toFixed(4)} at 1 input, 0.1 cached input, 4 output USD per million tokens`,
      );
    });

    it("a second issue on the same repository (the benchmark's warm run) builds no image, neither for the agent nor for the judge", async () => {
      const setup = demoSetup('demo-rerun-');
      // Unpaced: back to back, the second run's writes would wait for GitHub's pacing.
      const config = { ...setup.config, app: { ...setup.config.app, githubWriteIntervalMs: 0 } };
      const s = await runAppDemo({
        ...setup,
        config,
        model: 'scripted',
        again: { afterMs: 0 },
        log: () => {},
      });
      expect(s.error).toBeNull();
      expect(s.again).toMatchObject({ verdict: 'verified', label_to_pr_ms: expect.any(Number) });
      const again = runFigures(
        s.again!.trace_path!,
        path.join(setup.config.runsDir, `${s.again!.run_id}-verify`, 'report.json'),
      );
      expect(again.builds).toBe(0);
      expect(again.reused).toBeGreaterThanOrEqual(2); // the agent's build_environment and the judge's
      expect(again.testMs).toBeGreaterThan(0);
    });
  },
);
