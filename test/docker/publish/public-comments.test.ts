import { rmSync } from 'node:fs';
import { homedir } from 'node:os';
import type { RunningApp } from '../../../src/app.js';
import type { Config } from '../../../src/config/config.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { REAL_JOB_DEPS } from '../../../src/pipeline/job.js';
import { publicScrubber } from '../../../src/pipeline/public.js';
import { Scrubber } from '../../../src/trace/redact.js';
import {
  calcFixScript,
  CALC_FILES,
  fakeDeps,
  installationClient,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
} from '../../support/app.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { compose } from '../../../src/cli/compose.js';

/** Issue 27, item 7: what the app posts is public; the operator's paths and endpoints are not. */

const O = 'acme';

describe('Scrubber', () => {
  it('replaces whole paths and URLs, longest first, and leaves look-alikes alone', () => {
    const s = new Scrubber([
      ['/srv/af', '<home>'],
      ['/srv/af/worktrees/', '<worktrees>'],
      ['http://10.0.0.5:8000/v1', '<model endpoint>'],
      ['/x', 'too short to be replaced'],
    ]);
    expect(s.text('git worktree add /srv/af/worktrees/r1-base abc')).toBe(
      'git worktree add <worktrees>/r1-base abc',
    );
    expect(s.text('"/srv/af" and /srv/af: and /srv/afx and /data/srv/af/x')).toBe(
      '"<home>" and <home>: and /srv/afx and /data/srv/af/x',
    );
    expect(s.text('POST http://10.0.0.5:8000/v1/chat/completions; /x/y')).toBe(
      'POST <model endpoint>/chat/completions; /x/y',
    );
  });

  it("the app's scrubber covers its directories, the model endpoint and the host it runs on", () => {
    const home = '/srv/agenticfix';
    const config = testConfig(home, {
      AGENTICFIX_MODEL_PROVIDER: 'vllm',
      AGENTICFIX_MODEL_NAME: 'm',
      AGENTICFIX_MODEL_BASE_URL: 'http://10.1.2.3:8000/v1',
    });
    const s = publicScrubber(config);
    expect(
      s.text(
        [
          `${home}/worktrees/r1`,
          `${home}/cache/x.git`,
          `${home}/runs/r1/events.jsonl`,
          'http://10.1.2.3:8000/v1/chat/completions',
          'connect ECONNREFUSED 10.1.2.3:8000',
        ].join('\n'),
      ),
    ).toBe(
      [
        '<worktrees>/r1',
        '<mirrors>/x.git',
        '<runs>/r1/events.jsonl',
        '<model endpoint>/chat/completions',
        'connect ECONNREFUSED <model endpoint>',
      ].join('\n'),
    );
    // A local model on a bare `localhost` (no port) leaves the word alone.
    const local = publicScrubber(
      testConfig(home, {
        AGENTICFIX_MODEL_PROVIDER: 'custom',
        AGENTICFIX_MODEL_NAME: 'm',
        AGENTICFIX_MODEL_BASE_URL: 'http://localhost/v1',
      }),
    );
    expect(local.text('localhost and http://localhost/v1/x')).toBe('localhost and <model endpoint>/x');
  });
});

describe('installation', () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let home: string;
  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, 'one', { files: CALC_FILES });
    emu.createRepo(O, 'two', { files: CALC_FILES });
    home = tempDir('install-');
    app = await startEmulatedApp(emu, {
      config: testConfig(home),
      deps: fakeDeps({ edits: () => ({}) }),
      sandbox: 'local',
    });
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    await app?.close();
    await emu?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });
  const labels = (repo: string) => emu.repoLabels(O, repo).map((l) => l.name);

  it('creates the trigger label in every repository that lacks it, and only there', async () => {
    // Someone made it in `two` already (GitHub matches label names in any case).
    const gh = await installationClient(emu, testConfig(home), O);
    await gh.rest.issues.createLabel({ owner: O, repo: 'two', name: 'AgenticFix' });
    expect(labels('one')).toEqual([]);
    const sent = emu.requests.length;
    const res = await emu.install(O);
    expect(res.status).toBe(200);
    await app.idle();
    expect(emu.repoLabels(O, 'one')).toEqual([
      {
        name: 'agenticfix',
        color: '5319e7',
        description: 'AgenticFix: a maintainer adds it to have the app fix the issue',
      },
    ]);
    expect(labels('two')).toEqual(['AgenticFix']);
    const creates = emu.requests.slice(sent).filter((r) => r.method === 'POST' && r.path.endsWith('/labels'));
    expect(creates.map((r) => r.path)).toEqual([`/repos/${O}/one/labels`]);
  });

  it('a repository added to the installation gets it too', async () => {
    emu.createRepo(O, 'three', { files: CALC_FILES });
    const res = await emu.deliver('installation_repositories', {
      action: 'added',
      installation: { id: emu.installationId(O) },
      repository_selection: 'selected',
      repositories_added: [{ id: 1, node_id: 'R_1', name: 'three', full_name: `${O}/three`, private: false }],
      repositories_removed: [],
      requester: null,
      sender: { login: O, type: 'User' },
    });
    expect(res.status).toBe(200);
    await app.idle();
    expect(labels('three')).toEqual(['agenticfix']);
  });
});

/**
 * The product's own run: the real agent loop (local sandbox) driven by a scripted model on a loopback
 * URL, the real judge (Docker) and evidence, published through the emulator. Its trace used to carry
 * the model's `base_url` and the worktree path, and its evidence the judge's worktree paths.
 */
describeIf(await needDocker())('a published run shows neither the model endpoint nor host paths', () => {
  const R = 'calc';
  let emu: GitHubEmulator;
  let app: RunningApp;
  let model: ScriptedModelServer;
  let home: string;
  let config: Config;
  beforeAll(async () => {
    emu = await startEmulator();
    const test = ['sh', '-c', "grep -q 'return a + b' calc.py"];
    emu.createRepo(O, R, {
      files: {
        ...CALC_FILES,
        Dockerfile: `FROM ${BASE_IMAGE}\n`,
        '.github/agenticfix.yml': `test: ${JSON.stringify(test)}\ndockerfile: Dockerfile\n`,
      },
    });
    emu.setPermission(O, R, 'maint', 'write');
    home = tempDir('public-');
    config = testConfig(home, { AGENTICFIX_BASE_IMAGE: BASE_IMAGE });
    model = await startScriptedModelServer(calcFixScript('add adds.', { runTests: true }));
    app = await startEmulatedApp(emu, {
      ...compose(config),
      config,
      deps: REAL_JOB_DEPS,
      model: { kind: 'url', baseUrl: model.url, name: 'scripted' },
      sandbox: 'local',
    });
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    await app?.close();
    await model?.close();
    await emu?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('every body the app posted is free of them', async () => {
    const n = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    const [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    const pr = emu.pulls.find((p) => p.number === run!.pr_number)!;
    const bodies = [
      pr.body ?? '',
      ...emu.comments(n).map((c) => c.body),
      ...emu.comments(pr.number).map((c) => c.body),
    ];
    const trace = bodies.find((b) => b.startsWith('## Trace summary'))!;
    const evidence = bodies.find((b) => b.startsWith('## Test evidence'))!;
    // What was there before is still there, placeholders instead of the values.
    expect(trace).toContain('"base_url":"<model endpoint>"');
    expect(trace).toMatch(/"worktree":"<worktrees>\/[\w-]+"/);
    expect(evidence).toMatch(/git worktree add --detach <worktrees>\//);
    const host = new URL(model.url).host;
    for (const body of bodies) {
      expect(body).not.toContain(host);
      expect(body).not.toContain(home);
      if (homedir().split('/').filter(Boolean).length >= 2) expect(body).not.toContain(homedir());
    }
  }, 240_000);
});
