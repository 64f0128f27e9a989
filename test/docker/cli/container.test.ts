import { execa } from 'execa';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { emulatorAppEnv } from '../../../src/cli/app-env.js';
import { startGitHubEmulator, type GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { PRIVATE_KEY, PUBLIC_KEY, SECRET } from '../../support/app.js';
import { bridgeGateway, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { CLI, freePort, until } from '../../support/e2e.js';

/**
 * Issue 27, item 6: "The README's container command fails as written". The documented commands (docs/operating.md) (the
 * offline build, the host's build network, `docker run`) are taken from it and run, with this test's
 * directory, port, .env and image name; the app in the container starts against the GitHub emulator and
 * the scripted model, which listen on the docker0 gateway so the container reaches them, and answers
 * /healthz.
 */

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const README = readFileSync(path.join(ROOT, 'docs/operating.md'), 'utf8');
const IMAGE = 'agenticfix-container-test';

/** The first ```sh block after `heading`, its continued lines joined. */
function block(heading: string): string[] {
  const at = README.indexOf(heading);
  expect(at).toBeGreaterThan(0);
  const body = /```sh\n([\s\S]*?)```/.exec(README.slice(at))![1]!;
  return body
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
}

describeIf(await needDocker())('the README container commands', () => {
  let emu: GitHubEmulator;
  let model: ScriptedModelServer;
  let dir: string;
  beforeAll(async () => {
    const gateway = await bridgeGateway();
    emu = await startGitHubEmulator({ webhookSecret: SECRET, publicKeyPem: PUBLIC_KEY, host: gateway });
    model = await startScriptedModelServer([], { host: gateway });
    dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-container-'));
  });
  afterAll(async () => {
    await execa('docker', ['rm', '-f', IMAGE], { reject: false });
    await emu.close();
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('builds offline, runs as written, and the app answers /healthz', async () => {
    const build = block('### Offline build');
    expect(build[0]).toBe('bash scripts/base-image.sh');
    expect(build[1]).toBe('bash scripts/node-image.sh');
    const started = Date.now();
    for (const line of build) {
      const cmd = line.replace(/^docker build -t agenticfix /, `docker build -q -t ${IMAGE} `);
      const r = await execa('bash', ['-c', cmd], { cwd: ROOT, reject: false, all: true });
      if (r.exitCode !== 0) throw new Error(`${cmd}: exit ${r.exitCode}\n${r.all!.slice(-4000)}`);
    }
    process.stderr.write(
      `container test: the offline build took ${Math.round((Date.now() - started) / 1000)} s\n`,
    );
    // Issue 38, item 7: the image runs the supported runtime, Node 22 LTS.
    const version = await execa('docker', ['run', '--rm', IMAGE, 'node', '--version']);
    expect(version.stdout).toMatch(/^v22\./);

    const [, install, network, run] = block('### The app in a container');
    expect(install).toBe('sudo install -d -o 10001 /srv/agenticfix');
    expect(network).toBe('sudo npx agenticfix build-network');
    expect(run).toContain('--group-add "$(stat -c %g /var/run/docker.sock)"');
    expect(run).toContain('-e AGENTICFIX_BUILD_NETWORK=preinstalled');
    // The host's part, as root (the test is): the directory the engine sees, the build network's rules.
    const home = path.join(dir, 'srv');
    await execa('install', ['-d', '-o', '10001', home]);
    const rules = await execa('node', [CLI, 'build-network'], { cwd: ROOT, reject: false, all: true });
    expect([rules.exitCode, rules.all]).toEqual([0, expect.any(String)]);

    // .env as `docker run --env-file` reads it: one line each, the key with `\n`.
    const env = {
      ...emulatorAppEnv({
        githubUrl: emu.url,
        appId: emu.appId,
        key: { PRIVATE_KEY: `"${PRIVATE_KEY.replace(/\n/g, '\\n')}"` },
        modelUrl: model.url,
      }),
      WEBHOOK_SECRET: SECRET,
    };
    writeFileSync(
      path.join(dir, '.env'),
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(''),
    );
    const port = await freePort();
    const cmd = run!
      .replace(/^docker run /, `docker run -d --name ${IMAGE} `)
      .replace('-p 3000:3000', `-p 127.0.0.1:${port}:3000`)
      .replace('--env-file .env', `--env-file ${path.join(dir, '.env')}`)
      .replaceAll('/srv/agenticfix', home)
      .replace(/ agenticfix$/, ` ${IMAGE}`);
    const started2 = await execa('bash', ['-c', cmd], { reject: false, all: true });
    expect([started2.exitCode, started2.all]).toEqual([0, expect.any(String)]);
    const logs = async () => (await execa('docker', ['logs', IMAGE], { reject: false, all: true })).all;
    let health: { status: number; body: string } | null = null;
    await until(
      '/healthz',
      async () => {
        health = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
          async (r) => ({ status: r.status, body: await r.text() }),
          () => null,
        );
        return health !== null;
      },
      120_000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await logs()}`);
    });
    expect(health!.status).toBe(200);
    expect(JSON.parse(health!.body)).toMatchObject({
      status: 'ok',
      checks: { store: { ok: true }, docker: { ok: true } },
    });
    expect(await logs()).toContain('agenticfix listening on');
  }, 1_800_000);
});
