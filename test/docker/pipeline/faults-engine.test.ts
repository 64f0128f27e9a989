import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config/config.js';
import { startScriptedModelServer, type ScriptStep } from '../../../src/emulator/scripted-model.js';
import { RUN_LABEL } from '../../../src/environment/docker.js';
import { checkBindMounts } from '../../../src/environment/startup.js';
import { LEASE_LABEL } from '../../../src/images/leases.js';
import { fileVersion } from '../../../src/tools/files.js';
import { judge } from '../../../src/verify/judge.js';
import { git } from '../../../src/workspace/git.js';
import {
  CALC_FILES,
  CALC_FIX,
  localJudge,
  startEmulatedApp,
  startEmulator,
  testConfig,
} from '../../support/app.js';
import { labelledIssue, SCRIPTED_DEPS } from '../../support/app-world.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { itIf } from '../../support/skip.js';
import { startEngineProxy } from '../../support/engine-proxy.js';
import { makeSourceRepo } from '../../support/git-fixtures.js';
import { compose } from '../../../src/cli/compose.js';

/**
 * Infrastructure is not the model's problem (issue 37): a judge build that met an engine it could not
 * reach was reported as `build_failed` ("The Dockerfile does not build from scratch: connect ENOENT").
 * The app reaches the engine through a proxy socket the test has closed; the shared engine is untouched.
 */

const engine = await needDocker();
const TEST = ['sh', '-c', 'grep -q "a + b" calc.py'];

/** Settles within `ms`, or fails saying what did not happen (never a hang up to jest's limit). */
const within = <T>(what: string, p: Promise<T>, ms: number): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${ms / 1000} s: ${what}`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
};

const call = (name: string, args: Record<string, unknown> = {}): ScriptStep => ({
  tool_calls: [{ name, arguments: args }],
});

describe('the Docker engine goes away mid-run', () => {
  // Issue 37: the model was told "infrastructure error… this is no test result", the run went on, the
  // judge reported build_failed ("connect ENOENT …docker-rel.sock") and the issue showed "✅ Done".
  itIf(engine)(
    'during the agent’s run_tests: the run ends infra_error, "⚠️ Infrastructure error", no judge',
    async () => {
      const [O, R] = ['acme', 'engine'];
      // The tests sleep: the engine is cut while their container runs (it is removed below).
      const sleepy = ['sh', '-c', 'sleep 30; grep -q "a + b" calc.py'];
      const home = mkdtempSync(path.join(tmpdir(), 'faults-engine-'));
      // Armed when the model's run_tests call goes out: the next start of the tests (an exec in the
      // run's warm container, or a container) cuts the engine half a second later, whatever the load.
      const proxy = await startEngineProxy(home, {
        closeOn: /^POST \/[^ ]*(containers|exec)\/[^/ ?]+\/start[ ?]/,
        afterMs: 500,
      });
      const before = process.env.DOCKER_HOST;
      process.env.DOCKER_HOST = proxy.host;
      const model = await startScriptedModelServer(
        [
          call('build_environment', { dockerfile: `FROM ${BASE_IMAGE}\nWORKDIR /workspace\n` }),
          call('edit_file', {
            path: 'calc.py',
            old_text: 'a - b',
            new_text: 'a + b',
            version: fileVersion(CALC_FILES['calc.py']),
          }),
          call('run_tests'),
          call('finish', { summary: 'add() adds' }),
        ],
        { onRequest: (i) => void (i === 2 && proxy.arm()) },
      );
      const emu = await startEmulator();
      let judged = 0;
      const app = await startEmulatedApp(emu, {
        config: testConfig(home, { AGENTICFIX_BASE_IMAGE: BASE_IMAGE }),
        deps: {
          ...SCRIPTED_DEPS,
          judge: async (o) => {
            judged++;
            return localJudge(o);
          },
        },
        model: { kind: 'url', baseUrl: model.url, name: 'scripted' },
        sandbox: 'docker',
      });
      let runId = '';
      try {
        emu.createRepo(O, R, {
          files: { ...CALC_FILES, '.github/agenticfix.yml': `test: ${JSON.stringify(sleepy)}\n` },
        });
        emu.setPermission(O, R, 'maint', 'maintain');
        emu.setWebhookUrl(app.url);
        const n = await labelledIssue(app, emu, O, R);
        runId = (await app.store.forIssue(O, R, n))[0]!.id;
        await within('the run to end', app.idle(), 90_000);
        const [run] = await app.store.forIssue(O, R, n);
        expect(run).toMatchObject({ state: 'failed', stop_reason: 'infra_error', verdict: null });
        expect(run!.error).toMatch(/^Infrastructure error: the Docker engine went away during the tests: /);
        expect(judged).toBe(0);
        expect(model.requests).toHaveLength(3); // the model is not asked again: nothing it did stands
        const status = emu.comments(n).find((c) => c.id === run!.status_comment_id)!.body;
        expect(status).toContain('### AgenticFix: ⚠️ Infrastructure error');
        expect(status).not.toContain('✅ Done');
        expect(emu.pulls).toHaveLength(0);
      } finally {
        await within('the app to close', app.close(), 30_000).finally(async () => {
          await model.close();
          await emu.close();
          await proxy.close();
          if (before === undefined) delete process.env.DOCKER_HOST;
          else process.env.DOCKER_HOST = before;
          // What the run left on the shared engine (its test container, its image lease).
          const docker = new Docker();
          for (const label of [`${RUN_LABEL}=${runId}`, `${LEASE_LABEL}=${runId}`]) {
            const left = runId ? await docker.listContainers({ all: true, filters: { label: [label] } }) : [];
            for (const c of left) await docker.getContainer(c.Id).remove({ force: true });
          }
          rmSync(home, { recursive: true, force: true });
        });
      }
    },
    180_000,
  );
});

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
