import { rmSync } from 'node:fs';
import type { RunningApp } from '../../src/app.js';
import type { GitHubEmulator } from '../../src/emulator/github.js';
import type { JobDeps } from '../../src/pipeline/job.js';
import { RunTrace } from '../../src/trace/trace.js';
import {
  CALC_CONFIG,
  CALC_FILES,
  CALC_FIX,
  fakeDeps,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
} from './app.js';

/**
 * Run pages under test: the emulator (a private repository with a writer, a reader and an outsider),
 * the app with the emulator's OAuth client, and a repair stand-in that traces tool calls through the
 * real trace writer (so the events reach the store as in a real run) and then waits at a gate.
 */

export const OWNER = 'acme';
export const REPO = 'secret-calc';
export const HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)>"\'&';

export interface WebFixture {
  emu: GitHubEmulator;
  app: RunningApp;
  /** serve's address (no trailing slash). */
  site: string;
  /** Lets the gated repair go on. */
  release(): void;
  /** Starts a run on a new issue (of `repo`, REPO by default); resolves with its id once it is recorded. */
  label(title: string, repo?: string): Promise<string>;
  close(): Promise<void>;
}

export async function startWebFixture(): Promise<WebFixture> {
  const emu = await startEmulator();
  emu.createRepo(OWNER, REPO, {
    files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG },
    private: true,
  });
  emu.setPermission(OWNER, REPO, 'writer-wu', 'write');
  emu.setPermission(OWNER, REPO, 'reader-ray', 'read');
  emu.createRepo('someone', 'else', { files: CALC_FILES }); // makes `outsider-olga` known to GitHub
  emu.setPermission('someone', 'else', 'outsider-olga', 'write');
  const home = tempDir('web-test-');
  const config = testConfig(home, { CLIENT_ID: emu.oauth.clientId, CLIENT_SECRET: emu.oauth.clientSecret });
  let gate = gateOf();
  const base = fakeDeps({ edits: () => CALC_FIX });
  // The stand-ins clone the private repository as the app does, with an installation token.
  const authed = (remote: string) => {
    const url = new URL(remote);
    url.username = 'x-access-token';
    url.password = emu.installationToken(OWNER);
    return url.toString();
  };
  const deps: JobDeps = {
    ...base,
    judge: (o) => base.judge({ ...o, remote: authed(o.remote) }),
    async repair(opts) {
      const trace = new RunTrace(opts.runId!, opts.config.runsDir, [], opts.onEvent);
      trace.event('repository_guidance', { path: 'AGENTS.md', chars: 120, cut: false });
      trace.event('tool_start', { name: 'read_file', args: { path: `calc.py${HOSTILE}` } });
      trace.event('tool_end', {
        name: 'read_file',
        args: { path: `calc.py${HOSTILE}` },
        result: {
          success: true,
          data: {
            path: `calc.py${HOSTILE}`,
            total_lines: 2,
            start_line: 1,
            end_line: 2,
            content: `def add(a, b):\n    return a - b  # ${HOSTILE}\n`,
          },
        },
        duration_ms: 4,
      });
      trace.event('model_reply', {
        model: 'm',
        usage: { prompt: 100, completion: 20, cached: 10, total: 120, estimated: true },
      });
      opts.onProgress?.({
        phase: 'working',
        step: 1,
        tokens_used: 120,
        token_budget: 1000,
        last_test: null,
        cost_usd: null,
        cost_budget: null,
      });
      await Promise.race([gate.promise, new Promise((r) => opts.signal?.addEventListener('abort', r))]);
      trace.event('tool_start', { name: 'edit_file', args: { path: 'calc.py' } });
      trace.event('tool_end', {
        name: 'edit_file',
        args: { path: 'calc.py', old_text: '    return a - b', new_text: '    return a + b' },
        result: { success: true, data: { changed: true } },
        duration_ms: 2,
      });
      // A test run with a failure whose output has a line far wider than a phone.
      trace.event('tool_start', { name: 'run_tests', args: {} });
      trace.event('tool_end', {
        name: 'run_tests',
        args: {},
        result: {
          success: true,
          data: {
            status: 'failed',
            exit_code: 1,
            summary: { passed: 3, failed: 1, errors: 0, skipped: 0, source: 'pytest' },
            failures: [{ id: 'tests/test_calc.py::test_add', message: `assert ${'9'.repeat(300)} == 3` }],
            duration_ms: 880,
            stdout: `FAILED tests/test_calc.py::test_add ${'x'.repeat(400)}`,
          },
        },
        duration_ms: 900,
      });
      return base.repair({ ...opts, remote: authed(opts.remote) });
    },
  };
  const app = await startEmulatedApp(emu, { config, deps, sandbox: 'local', livePollMs: 100 });
  emu.setWebhookUrl(app.url);
  return {
    emu,
    app,
    site: app.url.replace(/\/api\/github\/webhooks$/, ''),
    release() {
      gate.release();
      gate = gateOf();
    },
    async label(title, repo = REPO) {
      const n = emu.createIssue(OWNER, repo, { title, body: `The body ${HOSTILE}`, user: 'reader-ray' });
      await emu.label(OWNER, repo, n, config.app.label, 'writer-wu');
      for (let i = 0; i < 200; i++) {
        const [run] = await app.store.forIssue(OWNER, repo, n);
        if (run) return run.id;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('no run recorded');
    },
    async close() {
      gate.release();
      await app.close();
      await emu.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

function gateOf(): { promise: Promise<void>; release(): void } {
  let release = () => {};
  const promise = new Promise<void>((r) => (release = r));
  return { promise, release };
}

/**
 * Signs `login` in through the OAuth web flow as a browser would (following redirects by hand, keeping
 * the cookies each site sets, as a browser does); the session cookie.
 */
export async function signIn(site: string, login: string, next = '/runs'): Promise<string> {
  return (await signInFlow(site, login, next)).session;
}

/** The same, with where the browser went after signing in. */
export async function signInFlow(
  site: string,
  login: string,
  next = '/runs',
): Promise<{ session: string; location: string }> {
  let url = `${site}/login?login=${login}&next=${encodeURIComponent(next)}`;
  const jar = new Map<string, string>();
  for (let hop = 0; hop < 5; hop++) {
    const mine = url.startsWith(site);
    const res = await fetch(url, {
      redirect: 'manual',
      headers: mine && jar.size ? { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } : {},
    });
    for (const c of mine ? res.headers.getSetCookie() : []) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    const location = res.headers.get('location');
    if (jar.get('agenticfix_session'))
      return { session: `agenticfix_session=${jar.get('agenticfix_session')}`, location: location ?? '' };
    if (!location) throw new Error(`sign-in stopped at ${url}: ${res.status}`);
    url = new URL(location, url).toString();
  }
  throw new Error('sign-in did not finish');
}

/** A private repository of `f`'s owner whose runs make two attempts, with writer-wu and reader-ray. */
export function attemptsRepo(f: WebFixture, name = 'multi-calc'): string {
  f.emu.createRepo(OWNER, name, {
    files: { ...CALC_FILES, '.github/agenticfix.yml': `${CALC_CONFIG}attempts: 2\n` },
    private: true,
  });
  f.emu.setPermission(OWNER, name, 'writer-wu', 'write');
  f.emu.setPermission(OWNER, name, 'reader-ray', 'read');
  return name;
}
