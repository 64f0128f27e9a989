import { execa } from 'execa';
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseDotenv } from 'dotenv';
import { parse as parseYaml } from 'yaml';
import { startGitHubEmulator, type GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { EnvValueError, writeEnvFile } from '../../../src/cli/setup.js';
import { loadConfig } from '../../../src/config/config.js';
import { PUBLIC_KEY, tempDir } from '../../support/app.js';
import { needDocker } from '../../support/docker.js';
import { itIf } from '../../support/skip.js';
import { CLI, freePort, until } from '../../support/e2e.js';
import { OperationChecker } from '../../support/github-description.js';

/**
 * Issue 27, item 1: `npm start` without credentials printed `APP_ID: Invalid input: expected number,
 * received NaN` and exited 2, while app.yml promised a setup page. Now `agenticfix setup` (and `serve`
 * without any credential) serves Probot's manifest flow; the emulator plays GitHub's part: the page the
 * form posts to, and the code's conversion into the app's id, key and webhook secret.
 */

const engine = await needDocker();
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const OWNER = 'octo-setup';

const unescapeHtml = (s: string) =>
  s.replace(
    /&(quot|#39|lt|gt|amp);/g,
    (_, e: string) => ({ quot: '"', '#39': "'", lt: '<', gt: '>', amp: '&' })[e]!,
  );

/** The setup address the command printed (it holds the one-time token). */
const printedUrl = (out: string) => /open (\S+) to register the app/.exec(out)?.[1];

/**
 * What a browser does on the setup page: GET it (at the printed address), post its form to GitHub,
 * follow GitHub's redirect back.
 */
async function registerLikeABrowser(
  pageUrl: string,
): Promise<{ manifest: Record<string, unknown>; final: Response }> {
  const origin = new URL(pageUrl).origin;
  const page = await fetch(pageUrl);
  expect(page.status).toBe(200);
  const html = await page.text();
  const action = unescapeHtml(/<form action="([^"]+)" method="post"/.exec(html)![1]!);
  const manifest = unescapeHtml(/name="manifest" id="manifest" value="([^"]*)"/.exec(html)![1]!);
  const created = await fetch(action, {
    method: 'POST',
    body: new URLSearchParams({ manifest }),
    redirect: 'manual',
  });
  expect(created.status).toBe(302);
  const back = created.headers.get('location')!;
  expect(back).toMatch(new RegExp(`^${origin}/probot/setup\\?code=\\w+&state=[\\w-]+$`));
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
    LOG_LEVEL: 'info', // serve's "agenticfix listening" is an info log line
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
    const { manifest, final } = await registerLikeABrowser(printedUrl(out)!);
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
    // The OAuth client under Probot's names, which the run pages' sign-in reads.
    expect(written).toMatch(/^GITHUB_CLIENT_ID=Iv1\.\w+$/m);
    expect(written).toMatch(/^GITHUB_CLIENT_SECRET=\w+$/m);
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

  it('only who has the printed token finishes the setup: import, cross-site POSTs, pages and callbacks without it are refused', async () => {
    const cwd = tempDir('setup-hostile-');
    const port = await freePort();
    const child = execa('node', [CLI, 'setup'], {
      cwd,
      env: env(port, cwd),
      extendEnv: false,
      reject: false,
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await until('the setup page', () => out.includes('to register the app'), 60_000);
      const origin = `http://127.0.0.1:${port}`;
      const creds = { appId: '666', pem: 'evil', webhook_secret: 'x\rAGENTICFIX_BUILD_NETWORK=unrestricted' };
      // Probot's "use an existing app" import: anyone reaching the port owned the app.
      const imported = await fetch(`${origin}/probot/import`, {
        method: 'POST',
        body: JSON.stringify(creds),
      });
      expect(imported.status).toBeGreaterThanOrEqual(400);
      // The same as a cross-site text/plain form from another page the operator has open.
      const crossSite = await fetch(`${origin}/probot/import`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain', origin: 'https://evil.example' },
        body: JSON.stringify(creds),
      });
      expect(crossSite.status).toBe(403);
      // The page and the callback need the token (the callback gets it back from GitHub as `state`).
      expect((await fetch(`${origin}/probot`)).status).toBe(403);
      expect((await fetch(`${origin}/probot?token=guess`)).status).toBe(403);
      expect((await fetch(`${origin}/probot/setup?code=abc`, { redirect: 'manual' })).status).toBe(403);
      const withToken = new URL(printedUrl(out)!);
      const foreign = await fetch(withToken, { headers: { origin: 'https://evil.example' } });
      expect(foreign.status).toBe(403);
      expect(existsSync(path.join(cwd, '.env'))).toBe(false);
      // The operator's browser, with the printed address, registers the app.
      const { final } = await registerLikeABrowser(withToken.href);
      expect(final.status).toBe(302);
      expect((await child).exitCode).toBe(0);
      expect(readFileSync(path.join(cwd, '.env'), 'utf8')).not.toContain('AGENTICFIX_BUILD_NETWORK');
    } finally {
      child.kill('SIGTERM');
      await child;
      rmSync(cwd, { recursive: true, force: true });
    }
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
        await registerLikeABrowser(printedUrl(out)!);
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

describe('.env as setup writes it (issue 35, item 2)', () => {
  it('a value with a control character is refused and nothing is written; a PEM key and quotes read back as they were', () => {
    const dir = tempDir('envfile-');
    const file = path.join(dir, '.env');
    writeFileSync(file, 'KEPT=1\n');
    for (const evil of [
      'secret\rAGENTICFIX_BUILD_NETWORK=unrestricted',
      'secret\u0000x',
      'a\u001bb',
      "x'\nAGENTICFIX_MAX_COST_USD=100000",
    ]) {
      expect(() => writeEnvFile(dir, { WEBHOOK_SECRET: evil })).toThrow(EnvValueError);
      expect(readFileSync(file, 'utf8')).toBe('KEPT=1\n');
    }
    const pem = '-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n';
    const odd = `it's "quoted" # not a comment $HOME \\n`;
    writeEnvFile(dir, { PRIVATE_KEY: pem, WEBHOOK_SECRET: odd });
    expect(parseDotenv(readFileSync(file))).toEqual({ KEPT: '1', PRIVATE_KEY: pem, WEBHOOK_SECRET: odd });
    rmSync(dir, { recursive: true, force: true });
  });

  it("the run pages' sign-in reads the OAuth client as setup writes it (GITHUB_CLIENT_*), CLIENT_* first", () => {
    const web = (env: Record<string, string>) => loadConfig(env).web;
    expect(web({ GITHUB_CLIENT_ID: 'Iv1.a', GITHUB_CLIENT_SECRET: 's' })).toMatchObject({
      clientId: 'Iv1.a',
      clientSecret: 's',
    });
    expect(
      web({ GITHUB_CLIENT_ID: 'Iv1.a', GITHUB_CLIENT_SECRET: 's', CLIENT_ID: 'Iv1.b', CLIENT_SECRET: 't' }),
    ).toMatchObject({ clientId: 'Iv1.b', clientSecret: 't' });
  });
});
