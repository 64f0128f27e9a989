import { runAppDemo } from '../../../src/demo/app.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { demoSetup } from '../../support/demo.js';

describeIf(await needDocker())(
  'demo --revise: label → draft PR → changes requested → verified revision, through the emulator and Docker',
  () => {
    it('pushes the revision as a new commit on the same pull request and answers the review thread', async () => {
      const s = await runAppDemo({
        ...demoSetup('demo-revise-'),
        model: 'scripted',
        revise: true,
        log: () => {},
      });
      expect(s.error).toBeNull();
      expect(s).toMatchObject({
        result: 'success',
        verdict: 'verified',
        base_tests: { passed: 3, failed: 2 },
        verify_tests: { passed: 5, failed: 0 },
        pr: { draft: true },
        pr_commits: 2,
      });
      expect(s.revisions).toEqual([
        {
          number: 1,
          commit: expect.stringMatching(/^[0-9a-f]{40}$/),
          verdict: 'verified',
          replied_threads: 1,
          // The demo prices its scripted model: each revision reports its own cost.
          cost_usd: expect.any(Number),
        },
      ]);
      const prComments = s.comments.filter((c) => c.on === 'pr').map((c) => c.body);
      const evidence = prComments.find((b) => b.startsWith('## Revision 1\n'));
      expect(evidence).toContain(s.revisions[0]!.commit);
      expect(evidence).toContain('verified');
    }, 300_000); // two Docker runs, each built and judged
  },
);
