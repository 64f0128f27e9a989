import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { Probot } from 'probot';
import pino from 'pino';
import { startApp, type RunningApp, type StartAppOptions } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { startGitHubEmulator, type GitHubEmulator } from '../../src/emulator/github.js';
import type { ScriptStep } from '../../src/emulator/scripted-model.js';
import { fileVersion } from '../../src/tools/files.js';
import type { JobDeps } from '../../src/pipeline/context.js';
import type { RepairResult } from '../../src/agent/types.js';
import type { RepairOptions } from '../../src/pipeline/types.js';
import { appOctokit, type GitHub } from '../../src/publish/github.js';
import { finish, newReport } from '../../src/verify/judge.js';
import type { JudgeOptions, Parts, Verdict, VerificationReport } from '../../src/verify/types.js';
import { git } from '../../src/workspace/git.js';
import { compose } from '../../src/cli/compose.js';

/** Shared fixtures of the app tests: keys, config, an emulator, and fast-but-real pipeline stand-ins. */

const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
export const PRIVATE_KEY = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
export const PUBLIC_KEY = keys.publicKey.export({ type: 'spki', format: 'pem' }).toString();
export const SECRET = 'webhook-secret-for-tests';
export const APP_ID = 4242;
export const quietLog = pino({ level: 'silent' });

export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

export function testConfig(home: string, env: Record<string, string> = {}): Config {
  return loadConfig(
    {
      AGENTICFIX_HOME: home,
      AGENTICFIX_RUNS_DIR: path.join(home, 'runs'),
      AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: '0',
      AGENTICFIX_GITHUB_RETRY_BASE_MS: '5',
      AGENTICFIX_STATUS_EDIT_INTERVAL_MS: '0',
      ...env,
    },
    home,
  );
}

export async function startEmulator(): Promise<GitHubEmulator> {
  return startGitHubEmulator({ webhookSecret: SECRET, appId: APP_ID, publicKeyPem: PUBLIC_KEY });
}

/** startApp as the app of `emu` (this file's id, key and secret), on a free port, quiet unless given a log; parts composed from its config unless given. */
export function startEmulatedApp(
  emu: GitHubEmulator,
  o: Omit<
    StartAppOptions,
    'appId' | 'privateKey' | 'webhookSecret' | 'baseUrl' | 'port' | 'log' | keyof Parts
  > &
    Partial<Parts> &
    Partial<Pick<StartAppOptions, 'log'>>,
): Promise<RunningApp> {
  return startApp({
    ...compose(o.config),
    appId: APP_ID,
    privateKey: PRIVATE_KEY,
    webhookSecret: SECRET,
    baseUrl: emu.url,
    port: 0,
    log: quietLog,
    ...o,
  });
}

/** An installation client for `owner`, built exactly as the app builds its own (`baseUrl`: another GitHub). */
export async function installationClient(
  emu: GitHubEmulator,
  config: Config,
  owner: string,
  Octokit = appOctokit(config),
  o: { log?: pino.Logger; baseUrl?: string } = {},
): Promise<GitHub> {
  const probot = new Probot({
    appId: APP_ID,
    privateKey: PRIVATE_KEY,
    baseUrl: o.baseUrl ?? emu.url,
    Octokit,
    log: o.log ?? quietLog,
  });
  return (await probot.auth(emu.installationId(owner))) as GitHub;
}

/** A small Python project whose `add` is wrong; the test command checks it. */
export const CALC_FILES = {
  'calc.py': 'def add(a, b):\n    return a - b\n',
  'README.md': '# calc\n',
};
export const CALC_TEST = ['python3', '-c', 'import calc; assert calc.add(2, 3) == 5, calc.add(2, 3)'];
export const CALC_CONFIG = `test: ${JSON.stringify(CALC_TEST)}\n`;
export const CALC_FIX = { 'calc.py': 'def add(a, b):\n    return a + b\n' };
/** CALC_FIX with a docstring: what a revision asked for "a docstring" changes. */
export const CALC_DOCSTRING = { 'calc.py': 'def add(a, b):\n    """Return a + b."""\n    return a + b\n' };

/** The scripted model's fix of CALC_FILES: read, edit `a - b` into `a + b`, optionally test, finish. */
export function calcFixScript(
  summary: string,
  o: { delayMs?: number; runTests?: boolean } = {},
): ScriptStep[] {
  const call = (name: string, args: Record<string, unknown>) => ({ tool_calls: [{ name, arguments: args }] });
  return [
    { ...call('read_file', { path: 'calc.py' }), delay_ms: o.delayMs ?? 0 },
    call('edit_file', {
      path: 'calc.py',
      old_text: 'a - b',
      new_text: 'a + b',
      version: fileVersion(CALC_FILES['calc.py']),
    }),
    ...(o.runTests ? [call('run_tests', {})] : []),
    call('finish', { summary }),
  ];
}

export interface FakeOptions {
  /** Files the "agent" writes for this call (`call` counts calls of this fake). */
  edits: (opts: RepairOptions, call: number) => Record<string, string>;
  /** When set, the repair waits here (after reporting `working`) until released or aborted. */
  gate?: Promise<void>;
}

/**
 * Pipeline stand-ins that do real work without a model or Docker: the repair clones the repository at
 * the base commit, writes the given files and exports the real diff plus a trace; the judge applies the
 * patch to a fresh clone and runs the test command on the base and the patched source.
 */
export function fakeDeps(o: FakeOptions): JobDeps & { calls: RepairOptions[] } {
  const calls: RepairOptions[] = [];
  return {
    calls,
    async repair(opts) {
      calls.push(opts);
      const call = calls.length - 1;
      const started = Date.now();
      const dir = tempDir('fake-repair-');
      try {
        await git(['clone', '-q', opts.remote, dir], { cwd: tmpdir() });
        await git(['checkout', '-q', '--detach', opts.baseCommit], { cwd: dir });
        opts.onProgress?.({
          phase: 'preparing_workspace',
          step: 0,
          tokens_used: 0,
          token_budget: 1000,
          cost_usd: 0,
          cost_budget: null,
          last_test: null,
        });
        opts.onProgress?.({
          phase: 'working',
          step: 1,
          tokens_used: 120,
          token_budget: 1000,
          cost_usd: 0.0004,
          cost_budget: null,
          last_test: 'failed',
        });
        if (o.gate) await Promise.race([o.gate, aborted(opts.signal)]);
        const runDir = path.join(opts.config.runsDir, opts.runId!);
        mkdirSync(runDir, { recursive: true });
        const events: object[] = [
          { type: 'run_start', seq: 1 },
          { type: 'model', price: { input: 2, cached_input: 0.5, output: 10 } },
        ];
        const cancelled = opts.signal?.aborted === true;
        if (!cancelled) {
          for (const [file, content] of Object.entries(o.edits(opts, call))) {
            mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
            writeFileSync(path.join(dir, file), content);
            events.push({
              type: 'tool_end',
              name: 'write_file',
              args: { path: file },
              result: { success: true },
              duration_ms: 3,
            });
          }
          events.push({
            type: 'model_reply',
            usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
            cost_usd: 0.0004,
          });
        }
        await git(['add', '-A'], { cwd: dir });
        const patch = (await git(['diff', '--cached', '--binary', opts.baseCommit], { cwd: dir })).stdout;
        const stop_reason = cancelled ? 'cancelled' : 'completed';
        events.push({ type: 'stop', stop_reason });
        const tracePath = path.join(runDir, 'events.jsonl');
        writeFileSync(tracePath, events.map((e) => JSON.stringify(e)).join('\n') + '\n');
        writeFileSync(path.join(runDir, 'final.patch'), patch);
        const result: RepairResult = {
          run_id: opts.runId!,
          stop_reason,
          base_commit: opts.baseCommit,
          patch,
          patch_path: path.join(runDir, 'final.patch'),
          patch_skipped: [],
          trace_path: tracePath,
          result_path: path.join(runDir, 'result.json'),
          run_dir: runDir,
          dockerfile: 'FROM agenticfix/debian:bookworm\n',
          image_id: 'sha256:fake',
          summary: 'Changed `add` to add.',
          tokens: { prompt: 100, completion: 20, cached: 0, total: 120 },
          cost_usd: 0.0004, // 100 × $2 + 20 × $10 per million
          requests: 1,
          tool_calls: Object.keys(o.edits(opts, call)).length,
          duration_ms: Date.now() - started,
          phases_ms: { agent: Date.now() - started },
          model_name: opts.model.kind === 'url' ? opts.model.name : (opts.config.model.name ?? 'fake-model'),
          suite_ms: null,
          prompt_hash: 'p1234',
          last_test: null,
          worktree_path: null,
          error: null,
        };
        return result;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    judge: localJudge,
    renderEvidence: (r) =>
      `Verdict **${r.verdict}**: ${r.reason}\n\n${r.commands.map((c) => `- \`${c}\``).join('\n')}`,
  };
}

function aborted(signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (!signal || signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** Runs the test command on the base and on the patched source (no Docker) and grades the patch. */
export async function localJudge(o: JudgeOptions): Promise<VerificationReport> {
  const dir = tempDir('fake-judge-');
  try {
    await git(['clone', '-q', o.remote, dir], { cwd: tmpdir() });
    await git(['checkout', '-q', '--detach', o.baseCommit], { cwd: dir });
    const run = async () =>
      (await execa(o.testArgv[0]!, o.testArgv.slice(1), { cwd: dir, reject: false })).exitCode === 0;
    const basePasses = await run();
    let verdict: Verdict;
    let reason: string;
    if (!o.patch.trim()) [verdict, reason] = ['empty_patch', 'The candidate patch changes nothing.'];
    else {
      await git(['apply', '--binary', '-'], { cwd: dir, input: o.patch });
      const patchedPasses = await run();
      if (!basePasses && patchedPasses)
        [verdict, reason] = ['verified', 'The test fails on the base and passes with the patch.'];
      else if (!patchedPasses) [verdict, reason] = ['regression', 'The test fails with the patch.'];
      else [verdict, reason] = ['no_reproduction', 'The test already passes on the base.'];
    }
    return report(verdict, reason, o, [`${o.testArgv.join(' ')} (base: ${basePasses ? 'pass' : 'fail'})`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A report in the judge's own shape (newReport + finish), for the stand-in judge. */
export function report(
  verdict: Verdict,
  reason: string,
  o: JudgeOptions,
  commands: string[],
): VerificationReport {
  const r = newReport({
    mode: 'live',
    runId: o.runId ?? 'judge',
    repo: o.remote,
    baseCommit: o.baseCommit,
    patch: o.patch ?? '', // some callers pass partial options
  });
  r.commands.push(...commands);
  return finish(r, verdict, reason);
}

export async function waitFor(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
