import { execa } from 'execa';
import { readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { startGitHubEmulator, type GitHubEmulator } from '../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../src/emulator/scripted-model.js';
import { PUBLIC_KEY, tempDir } from './support/app.js';
import { needDocker } from './support/docker.js';
import { itIf } from './support/skip.js';
import { CLI, freePort, until } from './support/e2e.js';
import { OperationChecker } from './support/github-description.js';

/**
 * Issue 27, item 1: `npm start` without credentials printed `APP_ID: Invalid input: expected number,
 * received NaN` and exited 2, while app.yml promised a setup page. Now `agenticfix setup` (and `serve`
 * without any credential) serves Probot's manifest flow; the emulator plays GitHub's part: the page the
 * form posts to, and the code's conversion into the app's id, key and webhook secret.
 */

const engine = await needDocker();
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OWNER = 'octo-setup';

/** What a browser does on the setup page: GET it, post its form to GitHub, follow GitHub's redirect back. */
async function registerLikeABrowser(
  origin: string,
): Promise<{ manifest: Record<string, unknown>; final: Response }> {
  const page = await fetch(`${origin}/probot`);
  const html = await page.text();
  const action = /<form action="([^"]+)" method="post"/.exec(html)![1]!;
  const manifest = /name="manifest" id="manifest" value='([^']*)'/.exec(html)![1]!;
  const created = await fetch(action, {
    method: 'POST',
    body: new URLSearchParams({ manifest }),
    redirect: 'manual',
  });
  expect(created.status).toBe(302);
  const back = created.headers.get('location')!;
  expect(back).toMatch(new RegExp(`^${origin}/probot/setup\\?code=\\w+$`));
  const final = await fetch(back, { redirect: 'manual' });
  return { manifest: JSON.parse(manifest) as Record<string, unknown>, final };
}

describe('registering the app through the manifest flow, on the emulator', () => {
  let emu: GitHubEmulator;
  let model: ScriptedModelServer;
  let dir: string;
  beforeAll(async () => {
    // The emulator starts with another app's key and secret: only the registered ones may work after.
    emu = await startGitHubEmulator({ webhookSecret: 'not-the-new-one', publicKeyPem: PUBLIC_KEY });
    emu.createRepo(OWNER, 'calc', { files: { 'README.md': 'calc\n' } });
    model = await startScriptedModelServer([]);
    dir = tempDir('setup-');
  }, 300_000);
  afterAll(async () => {
    await emu?.close();
    await model?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const env = (port: number, home: string) => ({
    PATH: process.env.PATH!,
    HOME: process.env.HOME ?? '/tmp',
    GHE_HOST: new URL(emu.url).host,
    GHE_PROTOCOL: 'http',
    HOST: '127.0.0.1',
    PORT: String(port),
    // No smee.io channel: the network of tests ends at loopback.
    NO_SMEE_SETUP: 'true',
    AGENTICFIX_HOME: path.join(home, 'home'),
    AGENTICFIX_RUNS_DIR: path.join(home, 'runs'),
    AGENTICFIX_MODEL_PROVIDER: 'custom',
    AGENTICFIX_MODEL_BASE_URL: model.url,
    AGENTICFIX_MODEL_NAME: 'scripted',
    LOG_LEVEL: 'warn',
  });

  it('`agenticfix setup` sends app.yml as the manifest, writes .env (owner-only) and exits; doctor then passes its settings', async () => {
    const cwd = tempDir('setup-cmd-');
    const port = await freePort();
    const child = execa('node', [CLI, 'setup'], {
      cwd,
      env: env(port, cwd),
      extendEnv: false,
      reject: false,
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    await until('the setup page', () => out.includes('to register the app'), 60_000);
    const origin = `http://127.0.0.1:${port}`;
    const { manifest, final } = await registerLikeABrowser(origin);
    // app.yml's text, with the setup page's own URLs.
    const appYml = parseYaml(readFileSync(path.join(ROOT, 'app.yml'), 'utf8')) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      ...appYml,
      redirect_url: `${origin}/probot/setup`,
      hook_attributes: { url: `${origin}/` },
    });
    expect(final.status).toBe(302);
    expect(final.headers.get('location')).toBe(`${emu.url}/apps/agenticfix/installations/new`);
    const done = await child;
    expect(done.exitCode).toBe(0);
    expect(done.stdout).toContain('the app is registered');

    const file = path.join(cwd, '.env');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const written = readFileSync(file, 'utf8');
    expect(written).toMatch(/^APP_ID=1$/m);
    expect(written).toMatch(/^WEBHOOK_SECRET=\w+$/m);
    expect(written).toMatch(/^PRIVATE_KEY="-----BEGIN RSA PRIVATE KEY-----\\n/m);
    // The conversion as GitHub's description documents it.
    const conversion = emu.requests.find((r) => r.path.startsWith('/app-manifests/'))!;
    expect(conversion.status).toBe(201);
    const checker = new OperationChecker('api.github.com');
    expect(checker.checkRequest(conversion)).toEqual([]);
    expect(checker.checkResponse(conversion)).toEqual({ checked: true, problems: [] });

    const doctor = await execa('node', [CLI, 'doctor', '--json'], {
      cwd,
      env: env(port, cwd),
      extendEnv: false,
      reject: false,
    });
    const checks = (JSON.parse(doctor.stdout) as { checks: { name: string; ok: boolean }[] }).checks;
    expect(checks.find((c) => c.name === 'settings')).toEqual({ name: 'settings', ok: true, detail: '' });
    rmSync(cwd, { recursive: true, force: true });
  }, 120_000);

  itIf(engine)(
    '`agenticfix serve` without credentials registers the app first, then serves with them',
    async () => {
      const cwd = tempDir('setup-serve-');
      const port = await freePort();
      const child = execa('node', [CLI, 'serve'], {
        cwd,
        env: { ...env(port, cwd), AGENTICFIX_BUILD_NETWORK: 'unrestricted' },
        extendEnv: false,
        reject: false,
      });
      let out = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      try {
        await until('the setup page', () => out.includes('to register the app'), 60_000);
        await registerLikeABrowser(`http://127.0.0.1:${port}`);
        await until(
          'serve to start with the new credentials',
          () => out.includes('agenticfix listening'),
          120_000,
        );
        // GitHub sends the installation to the registered webhook URL, signed with the new secret; the app
        // answers with a token minted by the new key: it creates its trigger label.
        const installed = await emu.install(OWNER);
        expect(installed.status).toBe(200);
        await until(
          'the label',
          () => emu.repoLabels(OWNER, 'calc').some((l) => l.name === 'agenticfix'),
          30_000,
        );
      } catch (err) {
        throw new Error(`${String(err)}\n--- serve\n${out}`);
      } finally {
        child.kill('SIGTERM');
        await child;
        rmSync(cwd, { recursive: true, force: true });
      }
    },
    300_000,
  );
});
