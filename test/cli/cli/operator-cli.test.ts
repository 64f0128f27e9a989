import { jest } from '@jest/globals';
import { execa } from 'execa';
import { chmodSync, chownSync, cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { APP_ID, PRIVATE_KEY } from '../../support/app.js';
import { commitAll, tempDir } from '../../support/git-fixtures.js';
import { buildNetworkCommand } from '../../../src/cli/build-network.js';
import { emulatorCommand } from '../../../src/cli/emulator.js';
import { setupCommand } from '../../../src/cli/setup.js';
import { configCommand } from '../../../src/cli/config-check.js';
import { doctorCommand } from '../../../src/cli/doctor.js';
import { evalCommand } from '../../../src/cli/eval.js';
import { runCommand } from '../../../src/cli/run.js';
import { verifyCommand } from '../../../src/cli/verify.js';
import { workerCommand } from '../../../src/cli/worker.js';
import { git } from '../../../src/workspace/git.js';
import { loadConfig } from '../../../src/config/config.js';
import { parseRepoConfig, REPO_CONFIG_SCHEMA_URL } from '../../../src/config/repo-config.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const CLI = path.join(ROOT, 'dist/cli/index.js');
const FIXTURE = fileURLToPath(new URL('../../fixtures/agent-repo', import.meta.url));

let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('agenticfix-operator-'));
}, 120_000);
afterAll(() => cleanup());

/** The CLI from dist/ with only `env` (and PATH), in `cwd`: what an operator's shell would see. */
async function agenticfix(args: string[], env: Record<string, string> = {}, cwd = dir) {
  const started = Date.now();
  const r = await execa('node', [CLI, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ...env },
    extendEnv: false,
    reject: false,
    timeout: 60_000,
  });
  return { code: r.exitCode, out: r.stdout, err: r.stderr, ms: Date.now() - started };
}

/** A command function run here, with what it printed. */
async function inProcess(run: () => Promise<number>): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = jest.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = jest.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  try {
    return { code: await run(), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

const lines = (s: string) => s.split('\n').filter(Boolean);
const noStack = (s: string) => expect(s).not.toMatch(/^\s+at /m);

/** A loopback port nothing listens on: bound by this test, then closed. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** An HTTP listener answering every request with `status`; its URL. */
async function answering(status: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((_, res) => res.writeHead(status).end('{}'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

// No engine at DOCKER_HOST: the settings and model checks are what these tests look at, and the
// Docker checks (build network included) would only cost time; the Docker test below sets its own.
const APP = {
  APP_ID: String(APP_ID),
  PRIVATE_KEY,
  WEBHOOK_SECRET: 'secret',
  DOCKER_HOST: 'unix:///nonexistent/docker.sock',
};

describe('the agenticfix CLI (commander)', () => {
  it('each command has --help (exit 0); unknown flags, commands and missing values are one line, exit 2', async () => {
    // Spawned: the commands whose modules differ most in what they load (each spawn costs seconds under load).
    for (const name of ['demo', 'serve']) {
      const help = await agenticfix([name, '--help']);
      expect([name, help.code]).toEqual([name, 0]);
      expect(help.out).toContain(`Usage: agenticfix ${name} `);
      const bogus = await agenticfix([name, '--bogus']);
      expect([name, bogus.code, lines(bogus.err)]).toEqual([
        name,
        2,
        [`agenticfix ${name}: unknown option '--bogus' (see agenticfix ${name} --help)`],
      ]);
    }
    // The others in this process, through the same functions the CLI calls.
    const handlers = { run: runCommand, verify: verifyCommand, eval: evalCommand, worker: workerCommand };
    const extra = {
      doctor: doctorCommand,
      'build-network': buildNetworkCommand,
      emulator: emulatorCommand,
      setup: setupCommand,
      config: configCommand,
    };
    for (const [name, handler] of Object.entries({ ...handlers, ...extra })) {
      const help = await inProcess(() => handler(['--help']));
      expect([name, help.code, help.out]).toEqual([
        name,
        0,
        expect.stringContaining(`Usage: agenticfix ${name} `),
      ]);
      const bogus = await inProcess(() => handler(['--bogus']));
      expect([name, bogus.code, bogus.err]).toEqual([
        name,
        2,
        `agenticfix ${name}: unknown option '--bogus' (see agenticfix ${name} --help)\n`,
      ]);
    }
    expect((await agenticfix(['help', 'run'])).out).toContain('--keep-worktree');
    const top = await agenticfix(['--help']);
    expect(top.code).toBe(0);
    expect(top.out).toMatch(/doctor +check the settings/);
    expect(await agenticfix(['frobnicate'])).toMatchObject({
      code: 2,
      err: "agenticfix: unknown command 'frobnicate' (see agenticfix --help)",
    });
    expect(await agenticfix([])).toMatchObject({ code: 2, err: expect.stringContaining('Commands:') });
    const missing = await agenticfix(['run', '--repo', 'r', '--test', 'true']);
    expect(missing).toMatchObject({
      code: 2,
      err: 'agenticfix run: --issue is required (see agenticfix run --help)',
    });
    expect(await agenticfix(['run', '--repo'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(/^agenticfix run: option '--repo <path\|URL>' argument missing/),
    });
    expect(await agenticfix(['demo', '--sandbox', 'vm'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(/^agenticfix demo: option '--sandbox <kind>' argument 'vm' is invalid/),
    });
    expect(await agenticfix(['eval', 'tasks.jsonl', '--runs', '0'])).toMatchObject({
      code: 2,
      err: 'agenticfix eval: --runs: must be 1 or more (see agenticfix eval --help)',
    });
  }, 300_000);

  it('a missing file is named in one line without a stack (exit 2)', async () => {
    const run = await agenticfix(['run', '--repo', 'r', '--issue', 'nope.md', '--test', 'true']);
    expect(run).toMatchObject({
      code: 2,
      err: 'agenticfix run: --issue nope.md: no such file (see agenticfix run --help)',
    });
    const verify = await agenticfix(['verify', '--patch', 'p.diff']);
    expect(verify).toMatchObject({
      code: 2,
      err: expect.stringMatching(/^agenticfix verify: --patch p.diff: no such file/),
    });
    const evalRun = await agenticfix(['eval', 'tasks.jsonl']);
    expect(evalRun).toMatchObject({
      code: 2,
      err: expect.stringMatching(/^agenticfix eval: the task file tasks.jsonl: no such file/),
    });
  }, 180_000);

  it('run --repo takes a relative path from the working directory', async () => {
    const work = path.join(dir, 'relative');
    const repo = path.join(work, 'myrepo');
    cpSync(FIXTURE, repo, { recursive: true });
    await git(['init', '-q', '-b', 'main'], { cwd: repo });
    await commitAll(repo, 'fixture');
    writeFileSync(path.join(work, 'script.json'), JSON.stringify({ model: 'scripted', steps: [] }));
    const r = await agenticfix(
      ['run', '--repo', 'myrepo', '--issue', 'myrepo/ISSUE.md', '--test', 'node --test'].concat([
        '--model',
        'scripted:script.json',
        '--sandbox',
        'local',
        '--json',
      ]),
      { AGENTICFIX_HOME: path.join(work, 'home'), AGENTICFIX_RUNS_DIR: path.join(work, 'runs') },
      work,
    );
    noStack(r.err);
    // The worktree was made from ./myrepo: the run got past the workspace to the model's (empty) script.
    const result = JSON.parse(r.out) as { stop_reason: string; error: string | null };
    expect(result.error ?? '').not.toMatch(/myrepo|workspace|clone/i);
    expect(r.err).toMatch(/^\[preparing_workspace, \d+ s\]$/m);
    expect(r.err).not.toMatch(/^run failed: .*(myrepo|repository)/m);
  }, 90_000);
});

describe('the start-up check (serve, worker, doctor)', () => {
  it('serve without settings names each missing one plainly, one line each, exit 2', async () => {
    // In production, as Probot: no setup page (test/setup.test.ts has it), the check's lines.
    const r = await agenticfix(['serve'], { NODE_ENV: 'production' });
    expect(r.code).toBe(2);
    noStack(r.err);
    expect(r.err).not.toMatch(/NaN|expected|received/);
    expect(lines(r.err)).toContain(
      'agenticfix serve: settings: APP_ID is not set; PRIVATE_KEY is not set (nor PRIVATE_KEY_PATH): the key GitHub generates for the app; WEBHOOK_SECRET is not set',
    );
    for (const l of lines(r.err)) expect(l).toMatch(/^agenticfix serve: /);
    expect(r.err).toContain('`agenticfix setup` registers the app');
  }, 180_000);

  it('the private key: a missing file and a non-PEM are named; a quoted PEM from --env-file is taken', async () => {
    const missing = await agenticfix(['doctor', '--json'], {
      ...APP,
      PRIVATE_KEY: '',
      PRIVATE_KEY_PATH: 'app.pem',
    });
    const settings = (out: string) =>
      (JSON.parse(out) as { checks: { name: string; ok: boolean; detail: string }[] }).checks[0]!;
    expect(missing.code).toBe(2);
    expect(settings(missing.out)).toEqual({
      name: 'settings',
      ok: false,
      detail: 'PRIVATE_KEY_PATH: cannot read app.pem (no such file)',
    });
    const garbage = await agenticfix(['serve'], { ...APP, PRIVATE_KEY: 'not a key' });
    expect(garbage.code).toBe(2);
    expect(lines(garbage.err)).toContain(
      'agenticfix serve: settings: PRIVATE_KEY: not a PEM private key (expected the .pem file GitHub generates for the app)',
    );
    // `docker run --env-file` passes PRIVATE_KEY="-----BEGIN ...\n..." with the quotes and `\n` as written.
    const quoted = `"${PRIVATE_KEY.trim().replace(/\n/g, '\\n')}"`;
    const ok = await agenticfix(['doctor', '--json'], { ...APP, PRIVATE_KEY: quoted });
    expect(settings(ok.out)).toEqual({ name: 'settings', ok: true, detail: '' });
    // And from a file relative to the working directory.
    writeFileSync(path.join(dir, 'app.pem'), PRIVATE_KEY);
    const fromFile = await agenticfix(['doctor', '--json'], {
      ...APP,
      PRIVATE_KEY: '',
      PRIVATE_KEY_PATH: 'app.pem',
    });
    expect(settings(fromFile.out).ok).toBe(true);
  }, 180_000);

  it('with Redis and PostgreSQL down serve exits 2 within the check timeout, one line each', async () => {
    const [redisPort, pgPort] = [await closedPort(), await closedPort()];
    const r = await agenticfix(['serve'], {
      ...APP,
      AGENTICFIX_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      AGENTICFIX_DATABASE_URL: `postgres://agenticfix:hunter2@127.0.0.1:${pgPort}/agenticfix`,
      AGENTICFIX_CHECK_TIMEOUT_S: '2',
    });
    expect(r.code).toBe(2);
    expect(r.ms).toBeLessThan(20_000);
    expect(lines(r.err)).toEqual([
      `agenticfix serve: redis: Redis at redis://127.0.0.1:${redisPort} does not answer (ECONNREFUSED): start it or fix AGENTICFIX_REDIS_URL`,
      `agenticfix serve: postgresql: PostgreSQL at postgres://127.0.0.1:${pgPort}/agenticfix does not answer (ECONNREFUSED): start it or fix AGENTICFIX_DATABASE_URL`,
    ]);
    expect(r.err).not.toContain('hunter2');
  }, 180_000);

  it('a cost limit with an operator model that has no price is warned about at start-up', async () => {
    const warnings = (out: string) => (JSON.parse(out) as { warnings: string[] }).warnings;
    const env = {
      ...APP,
      AGENTICFIX_MODEL_PROVIDER: 'custom',
      AGENTICFIX_MODEL_NAME: 'unpriced-model',
      AGENTICFIX_MODEL_BASE_URL: `http://127.0.0.1:${await closedPort()}/v1`,
    };
    const limited = await agenticfix(['doctor', '--json'], { ...env, AGENTICFIX_MAX_COST_USD: '2' });
    expect(warnings(limited.out)).toEqual([
      expect.stringMatching(
        /^The run may spend at most 2 USD, and model `unpriced-model` has no price .* every run of it is refused\.$/,
      ),
    ]);
    const unlimited = await agenticfix(['doctor', '--json'], env);
    expect(warnings(unlimited.out)).toEqual([]);
  }, 180_000);

  it('the model: none configured, an endpoint that does not answer, a refused key, one that answers', async () => {
    const model = (out: string) =>
      (JSON.parse(out) as { checks: { name: string; detail: string }[] }).checks.find(
        (c) => c.name === 'model',
      );
    const none = await agenticfix(['doctor', '--json'], APP);
    expect(none.code).toBe(2);
    expect(model(none.out)?.detail).toMatch(/^no model: AGENTICFIX_MODEL_PROVIDER is not set/);
    const port = await closedPort();
    const custom = { AGENTICFIX_MODEL_PROVIDER: 'custom', AGENTICFIX_MODEL_NAME: 'm' };
    const down = await agenticfix(['doctor', '--json'], {
      ...APP,
      ...custom,
      AGENTICFIX_MODEL_BASE_URL: `http://127.0.0.1:${port}/v1`,
    });
    expect(model(down.out)).toEqual({
      name: 'model',
      ok: false,
      detail: `the model endpoint http://127.0.0.1:${port}/v1 does not answer (ECONNREFUSED): start it or fix AGENTICFIX_MODEL_BASE_URL`,
    });
    const refusing = await answering(401);
    const answeringOne = await answering(404);
    try {
      const refused = await agenticfix(['doctor', '--json'], {
        ...APP,
        ...custom,
        AGENTICFIX_MODEL_BASE_URL: refusing.url,
      });
      expect(model(refused.out)?.detail).toMatch(
        /refused the key \(HTTP 401\): check AGENTICFIX_MODEL_API_KEY$/,
      );
      const ok = await agenticfix(['doctor', '--json'], {
        ...APP,
        ...custom,
        AGENTICFIX_MODEL_BASE_URL: answeringOne.url,
      });
      expect(model(ok.out)).toEqual({ name: 'model', ok: true, detail: '' });
    } finally {
      await refusing.close();
      await answeringOne.close();
    }
  }, 180_000);

  it('no Docker engine: the check says where it looked and what to run', async () => {
    const r = await agenticfix(['doctor'], { ...APP, DOCKER_HOST: `unix://${path.join(dir, 'no.sock')}` });
    expect(r.code).toBe(2);
    expect(lines(r.out)).toContain(
      `FAIL  docker: no Docker engine answers at unix://${path.join(dir, 'no.sock')} (ENOENT): start one (\`bash scripts/setup-docker.sh\` as root) or set DOCKER_HOST`,
    );
  }, 180_000);

  it('a socket this user may not open: the check names its group and the --group-add to give', async () => {
    // Found as: `connect EACCES /var/run/docker.sock` and nothing else. Reproduced as a user outside the
    // group of a socket only its owner and group may use (root would pass any permission check).
    const open = mkdtempSync(path.join(tmpdir(), 'agenticfix-sock-'));
    chmodSync(open, 0o755);
    const socket = path.join(open, 'docker.sock');
    const server = net.createServer((c) => c.end());
    await new Promise<void>((r) => server.listen(socket, r));
    chownSync(socket, 0, 4242);
    chmodSync(socket, 0o660);
    try {
      const r = await execa(
        'setpriv',
        ['--reuid=65534', '--regid=65534', '--clear-groups', 'node', CLI, 'doctor', '--json'],
        {
          cwd: open,
          env: { PATH: process.env.PATH!, HOME: open, ...APP, DOCKER_HOST: `unix://${socket}` },
          extendEnv: false,
          reject: false,
        },
      );
      const docker = (JSON.parse(r.stdout) as { checks: { name: string; detail: string }[] }).checks.find(
        (c) => c.name === 'docker',
      );
      expect(docker?.detail).toBe(
        `cannot open ${socket} (permission denied): run as a member of its group (4242): \`usermod -aG 4242 <user>\`, in a container \`docker run --group-add 4242\` (\`--group-add $(stat -c %g ${socket})\`), with compose DOCKER_GID=4242 in .env`,
      );
    } finally {
      server.close();
      rmSync(open, { recursive: true, force: true });
    }
  }, 60_000);

  it('a misspelt AGENTICFIX_ variable is warned about, naming the setting it resembles', async () => {
    const r = await agenticfix(['worker'], {
      AGENTICFIX_CONCURENCY: '4',
      AGENTICFIX_TEST_REDIS_URL: 'redis://x',
    });
    expect(r.code).toBe(2);
    expect(lines(r.err)[0]).toBe(
      'agenticfix worker: warning: AGENTICFIX_CONCURENCY is not a setting and is ignored (did you mean AGENTICFIX_CONCURRENCY?)',
    );
    expect(r.err).not.toContain('AGENTICFIX_TEST_REDIS_URL');
  }, 180_000);
});

// Issue 38, item 5: a repository's config could be checked only by labelling an issue.
describe('agenticfix config check', () => {
  const write = (name: string, text: string) => (writeFileSync(path.join(dir, name), text), name);

  it('exits 2 on a bad file with the message the issue gets, naming the key meant; 0 on a good one', async () => {
    const text = 'lable: fix-me\nbudgets: { tokns: 5000 }\nverify: { rebuild: never }\n';
    const bad = await agenticfix(['config', 'check', write('bad.yml', text)]);
    const issue = parseRepoConfig(text, loadConfig({}));
    expect(issue.ok).toBe(false);
    expect(bad).toMatchObject({ code: 2, out: '', err: `bad.yml:\n${!issue.ok && issue.error}` });
    expect(lines(bad.err).slice(1)).toEqual([
      '.github/agenticfix.yml is invalid:',
      '- `budgets.tokns`: unknown key (did you mean `budgets.tokens`?)',
      '- `verify.rebuild`: Invalid option: expected one of "changed"|"always"',
      '- `lable`: unknown key (did you mean `label`?)',
    ]);
    const json = await agenticfix(['config', 'check', '--json', 'bad.yml']);
    expect([json.code, JSON.parse(json.out)]).toEqual([2, { ok: false, error: !issue.ok && issue.error }]);

    // The operator limits of this environment: a ceiling from it refuses what the defaults allow.
    const good = write(
      'good.yml',
      `# yaml-language-server: $schema=${REPO_CONFIG_SCHEMA_URL}\nbudgets: { tokens: 90000 }\n`,
    );
    expect(await agenticfix(['config', 'check', good])).toMatchObject({ code: 0, out: 'good.yml: valid' });
    expect(await agenticfix(['config', 'check', good], { AGENTICFIX_TOKEN_BUDGET: '50000' })).toMatchObject({
      code: 2,
      err: "good.yml:\n.github/agenticfix.yml asks for more than the operator allows:\n- `budgets.tokens`: 90000 exceeds the operator's ceiling of 50000 tokens",
    });
    // The default path, and the size limit checked before parsing, as the app does.
    expect(await agenticfix(['config', 'check'])).toMatchObject({
      code: 2,
      err: 'agenticfix config: .github/agenticfix.yml: no such file (see agenticfix config --help)',
    });
    const big = write('big.yml', `# ${'x'.repeat(70_000)}\n`);
    expect(await agenticfix(['config', 'check', big])).toMatchObject({
      code: 2,
      err: 'big.yml:\n`.github/agenticfix.yml` has 70003 bytes, over the 65536-byte limit; nothing was read.',
    });
  }, 120_000);
});
