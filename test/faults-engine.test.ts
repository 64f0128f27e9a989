import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../src/config/config.js';
import { checkBindMounts } from '../src/environment/startup.js';
import { judge } from '../src/verify/judge.js';
import { git } from '../src/workspace/git.js';
import { CALC_FILES, CALC_FIX } from './support/app.js';
import { BASE_IMAGE, needDocker } from './support/docker.js';
import { itIf } from './support/skip.js';
import { startEngineProxy } from './support/engine-proxy.js';
import { makeSourceRepo } from './support/git-fixtures.js';
import { compose } from '../src/cli/compose.js';

/**
 * Infrastructure is not the model's problem (issue 37): a judge build that met an engine it could not
 * reach was reported as `build_failed` ("The Dockerfile does not build from scratch: connect ENOENT").
 * The app reaches the engine through a proxy socket the test has closed; the shared engine is untouched.
 */

const engine = await needDocker();
const TEST = ['sh', '-c', 'grep -q "a + b" calc.py'];

describe('the judge with no engine to reach', () => {
  // Issue 37: "The Dockerfile does not build from scratch: connect ENOENT …docker-rel.sock" (build_failed).
  it('a build that fails because the engine cannot be reached is infra_error, never build_failed', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'faults-judge-engine-'));
    const proxy = await startEngineProxy(home);
    await proxy.close(); // its socket is gone: nothing answers there
    const before = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = proxy.host;
    try {
      const repo = await makeSourceRepo(path.join(home, 'repo'), CALC_FILES);
      writeFileSync(path.join(repo.path, 'calc.py'), CALC_FIX['calc.py']);
      const patch = (await git(['diff'], { cwd: repo.path })).stdout;
      const config = loadConfig({ AGENTICFIX_HOME: path.join(home, 'home') }, home);
      const report = await judge({
        ...compose(config),
        config,
        remote: repo.path,
        baseCommit: repo.head,
        patch,
        dockerfile: `FROM ${BASE_IMAGE}\n`,
        testArgv: TEST,
        runId: 'engine-gone-verify',
      });
      expect(report.verdict).toBe('infra_error');
      expect(report.reason).toMatch(/^The Docker engine could not be reached while building: /);
    } finally {
      if (before === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = before;
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('the start-up mount check', () => {
  // Issue 37: each start-up left a 0-byte `..mount-check-*.lent` file in worktrees/.
  itIf(engine)(
    'leaves nothing in the worktree directory',
    async () => {
      const home = mkdtempSync(path.join(tmpdir(), 'faults-mount-check-'));
      try {
        const config = loadConfig({ AGENTICFIX_HOME: home, AGENTICFIX_BASE_IMAGE: BASE_IMAGE }, home);
        mkdirSync(config.worktreeDir, { recursive: true });
        await checkBindMounts(new Docker(), config);
        expect(readdirSync(config.worktreeDir)).toEqual([]);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
