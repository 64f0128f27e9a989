import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RunningApp } from '../../../src/app.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { recordedAttempts } from '../../../src/pipeline/attempts.js';
import {
  CALC_CONFIG,
  CALC_FILES,
  CALC_FIX,
  fakeDeps,
  startEmulatedApp,
  testConfig,
  waitFor,
} from '../../support/app.js';
import { PRICED_MODEL_ENV, startAppWorld, type AppWorld } from '../../support/app-world.js';

const O = 'acme';
const WRONG = { 'calc.py': 'def add(a, b):\n    return a * b\n' };
const BIG = {
  'calc.py': 'def add(a, b):\n    # the sum, as the issue asks\n    total = a + b\n    return total\n',
  'README.md': '# calc\n\nAdds numbers.\n',
};
/** When set, each repair waits here (after reporting its spend) until released or stopped. */
let gate: Promise<void> | undefined;
/** What attempt n writes, by repository: `a<n>` → files. */
let plan: Record<string, Record<string, Record<string, string>>> = {};
const deps = fakeDeps({
  edits: (opts) => {
    const n = /-a(\d+)$/.exec(opts.runId!)?.[1] ?? '1';
    const repo = Object.keys(plan).find((r) => opts.remote.includes(`/${r}`))!;
    return plan[repo]![`a${n}`] ?? {};
  },
  get gate() {
    return gate;
  },
});

/** The app with `slots` (AGENTICFIX_CONCURRENCY) for runs and attempts, and the stand-in repair above. */
const attemptsWorld = (slots: number) =>
  startAppWorld({
    deps,
    env: {
      ...PRICED_MODEL_ENV,
      AGENTICFIX_MODEL_NAME: 'priced-model',
      AGENTICFIX_MAX_ATTEMPTS: '3',
      AGENTICFIX_CONCURRENCY: String(slots),
    },
  });

/** Labels an issue of a new repository `repo` with `config`, its attempts writing `attempts`. */
async function label(
  emu: GitHubEmulator,
  repo: string,
  config: string,
  attempts: Record<string, Record<string, string>>,
): Promise<number> {
  plan = { ...plan, [repo]: attempts };
  emu.createRepo(O, repo, { files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG + config } });
  emu.setPermission(O, repo, 'maint', 'write');
  const n = emu.createIssue(O, repo, { title: 'add() subtracts', user: 'alice' });
  await emu.label(O, repo, n, 'agenticfix', 'maint');
  return n;
}

/**
 * Several attempts of one run through the app (webhook, queue, store, judge stand-in, GitHub emulator):
 * each attempt is repaired under its own run id and judged on its own; the smallest verified patch is
 * published with a table of attempts; none verified opens nothing; the cost limit and a cancel hold for
 * all attempts together. The repair stand-in writes what the attempt's id asks for (its cost is $0.0004).
 * One slot: the attempts run one after another, as on a busy machine.
 */
describe('attempts through the app', () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let world: AppWorld;
  let config: ReturnType<typeof testConfig>;

  beforeAll(async () => {
    world = await attemptsWorld(1);
    ({ emu, app, config } = world);
  });
  afterAll(() => world?.close(app));

  const bot = (n: number, repo: string) =>
    emu.comments(n, `${O}/${repo}`).filter((c) => c.user === emu.botLogin);
  const runOf = async (repo: string, n: number) => (await app.store.forIssue(O, repo, n))[0]!;
  const stateOf = async (repo: string, n: number) => (await app.store.forIssue(O, repo, n))[0]?.state;

  it('three attempts: each judged on its own, the smallest verified patch published with a table of three rows', async () => {
    const calls = deps.calls.length;
    const n = await label(emu, 'three', 'attempts: 3\n', { a1: WRONG, a2: BIG, a3: CALC_FIX });
    await app.idle();
    const run = await runOf('three', n);
    // Each attempt its own repair under its own id (its own worktree, trace and run directory).
    expect(deps.calls.slice(calls).map((c) => c.runId)).toEqual([
      `${run.id}-a1`,
      `${run.id}-a2`,
      `${run.id}-a3`,
    ]);
    const attempts = recordedAttempts(run);
    expect(attempts.map((a) => [a.run_id, a.verdict, a.published])).toEqual([
      [`${run.id}-a1`, 'regression', false],
      [`${run.id}-a2`, 'verified', false],
      [`${run.id}-a3`, 'verified', true],
    ]);
    expect(attempts[1]!.changed_lines).toBeGreaterThan(attempts[2]!.changed_lines);
    expect(attempts[1]!.changed_files).toBe(2);
    // The run is the published attempt's, its cost that of all three.
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    expect(run.cost_usd).toBeCloseTo(0.0012, 10);
    expect(run.patch_path).toMatch(new RegExp(`${run.id}-a3/final\\.patch$`));
    expect(readFileSync(run.patch_path!, 'utf8')).not.toContain('README.md');
    const evidence = bot(run.pr_number!, 'three').find((c) => c.body.startsWith('## Test evidence'))!.body;
    const rows = evidence.split('\n').filter((l) => /^\| \d/.test(l));
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatch(/^\| 1 \| `regression` \|/);
    expect(rows[2]).toMatch(/^\| 3 \(published\) \| `verified` \| .* \| 2 lines, 1 files \| \$0\.0004 \|/);
    expect(rows[2]).toContain(`${run.id}-a3`);
    // One status comment for the issue, a line per attempt.
    const status = bot(n, 'three');
    expect(status).toHaveLength(1);
    expect(status[0]!.body).toContain('Attempt 3 of 3 published');
    for (const v of ['Attempt 1 (`' + run.id + '-a1`): `regression`', 'Attempt 2', 'Attempt 3'])
      expect(status[0]!.body).toContain(v);
    expect(
      emu.pulls.filter((p) => p.pull && p.title.includes(`#${n}`) && p.body?.includes(run.id)),
    ).toHaveLength(1);
  });

  it('none verified: no pull request, and the status comment says each attempt’s verdict', async () => {
    const n = await label(emu, 'none', 'attempts: 2\n', { a1: WRONG, a2: {} });
    await app.idle();
    const run = await runOf('none', n);
    expect(run).toMatchObject({ state: 'done', pr_number: null, verdict: 'regression' });
    expect(recordedAttempts(run).map((a) => [a.verdict, a.published])).toEqual([
      ['regression', false],
      ['empty_patch', false],
    ]);
    const status = bot(n, 'none')[0]!.body;
    expect(status).toContain('No attempt was verified; no pull request was opened.');
    expect(status).toContain('Attempt 1');
    expect(status).toContain('`empty_patch`');
    expect(emu.pulls.filter((p) => p.pull && p.body?.includes(run.id))).toHaveLength(0);
  });

  it('the cost limit holds for all attempts together: each gets what is left, the rest do not start', async () => {
    const calls = deps.calls.length;
    const n = await label(emu, 'costly', 'attempts: 3\nmax_cost_usd: 0.0007\n', {
      a1: WRONG,
      a2: WRONG,
      a3: CALC_FIX,
    });
    await app.idle();
    const run = await runOf('costly', n);
    const budgets = deps.calls.slice(calls).map((c) => c.budgets!.costUsd);
    expect(budgets).toHaveLength(2);
    expect(budgets[0]).toBe(0.0007);
    expect(budgets[1]).toBeCloseTo(0.0003, 10);
    const attempts = recordedAttempts(run);
    expect(attempts.map((a) => a.verdict)).toEqual(['regression', 'regression', 'not_run']);
    expect(attempts[2]!.reason).toContain('spent the cost limit');
    expect(run.cost_usd).toBeCloseTo(0.0008, 10);
    expect(run.pr_number).toBeNull();
  });

  it('first_verified stops at the first verified attempt', async () => {
    const n = await label(emu, 'first', 'attempts: 3\nattempts_policy: first_verified\n', {
      a1: BIG,
      a2: CALC_FIX,
      a3: CALC_FIX,
    });
    await app.idle();
    const run = await runOf('first', n);
    expect(recordedAttempts(run).map((a) => [a.verdict, a.published])).toEqual([
      ['verified', true],
      ['not_run', false],
      ['not_run', false],
    ]);
    expect(run.pr_number).not.toBeNull();
  });

  it('cancel stops every attempt: the running one and those not started', async () => {
    let release!: () => void;
    gate = new Promise<void>((r) => (release = r));
    try {
      const calls = deps.calls.length;
      const n = await label(emu, 'cancel', 'attempts: 3\n', { a1: CALC_FIX, a2: CALC_FIX, a3: CALC_FIX });
      await waitFor(async () => (await stateOf('cancel', n)) === 'running' && deps.calls.length > calls);
      await emu.comment(O, 'cancel', n, '/agenticfix cancel', 'maint');
      await app.idle();
      const run = await runOf('cancel', n);
      expect(run).toMatchObject({ state: 'cancelled', pr_number: null });
      expect(deps.calls.length).toBe(calls + 1);
      expect(recordedAttempts(run).map((a) => a.verdict)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    } finally {
      release();
      gate = undefined;
    }
  });

  it('publishing resumed after a failure keeps the table of attempts', async () => {
    // The pull request is not opened by this process (GitHub answers 502); the next one publishes it.
    emu.failNext({ method: 'POST', path: /\/repos\/acme\/resumed\/pulls$/ }, Array(4).fill({ status: 502 }));
    const n = await label(emu, 'resumed', 'attempts: 2\n', { a1: BIG, a2: CALC_FIX });
    await app.idle();
    let run = await runOf('resumed', n);
    expect(run.state).toBe('publish_pending');
    const record = JSON.parse(run.publish!) as Record<string, unknown>;
    await app.store.update(run.id, {
      publish: JSON.stringify({ ...record, next_at: new Date().toISOString() }),
    });
    await app.close();
    app = await startEmulatedApp(emu, { config, deps, sandbox: 'local' });
    emu.setWebhookUrl(app.url);
    await waitFor(async () => (await stateOf('resumed', n)) === 'done', 30_000);
    await app.idle();
    run = await runOf('resumed', n);
    const evidence = bot(run.pr_number!, 'resumed').find((c) => c.body.startsWith('## Test evidence'))!.body;
    expect(evidence.split('\n').filter((l) => /^\| \d/.test(l))).toHaveLength(2);
    expect(evidence).toMatch(/^\| 2 \(published\) \| `verified` \|/m);
    expect(bot(n, 'resumed')[0]!.body).toContain('Attempt 2 of 2 published');
  });

  it('`/agenticfix rerun attempts=N` sets the number; above AGENTICFIX_MAX_ATTEMPTS it is refused', async () => {
    const n = await label(emu, 'rerun', '', { a1: CALC_FIX, a2: BIG });
    await app.idle();
    expect(recordedAttempts(await runOf('rerun', n))).toEqual([]); // one attempt: the repository's default
    await emu.comment(O, 'rerun', n, '/agenticfix rerun attempts=4', 'maint');
    await app.idle();
    expect(bot(n, 'rerun').at(-1)!.body).toContain("attempts=4 exceeds the operator's ceiling of 3 attempts");
    await emu.comment(O, 'rerun', n, '/agenticfix rerun attempts=2', 'maint');
    await app.idle();
    const run = await runOf('rerun', n);
    expect(run).toMatchObject({ trigger: 'rerun', attempts_asked: 2 });
    expect(recordedAttempts(run).map((a) => [a.verdict, a.published])).toEqual([
      ['verified', true],
      ['verified', false],
    ]);
  });
});

/**
 * The embedded queue with two slots: a run's attempts take both at once (as distributed attempts take
 * workers), the third waiting for one to free; the shared cost limit and a cancel hold for them all.
 * Attempts ran one after another here before, whatever the slots.
 */
describe('attempts at once through the app (two slots)', () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let world: AppWorld;

  beforeAll(async () => {
    world = await attemptsWorld(2);
    ({ emu, app } = world);
  });
  afterAll(() => world?.close());

  const runOf = async (repo: string, n: number) => (await app.store.forIssue(O, repo, n))[0]!;
  /** Labels `repo`'s issue and waits until two of its attempts are repairing at once, held at the gate. */
  async function twoAtOnce(repo: string, config: string, attempts: Record<string, Record<string, string>>) {
    let release!: () => void;
    gate = new Promise<void>((r) => (release = r));
    const calls = deps.calls.length;
    const n = await label(emu, repo, config, attempts);
    await waitFor(async () => deps.calls.length === calls + 2);
    await new Promise((r) => setTimeout(r, 300));
    expect(deps.calls.length).toBe(calls + 2); // the third waits for a slot
    return { n, calls, release: () => ((gate = undefined), release()) };
  }
  const traceOf = (runId: string) => {
    const call = deps.calls.find((c) => c.runId === runId)!;
    return readFileSync(path.join(call.config.runsDir, runId, 'events.jsonl'), 'utf8');
  };

  it('two attempts repair at once, the third once a slot frees; each recorded with its trace, the smallest verified published once', async () => {
    const { n, calls, release } = await twoAtOnce('together', 'attempts: 3\n', {
      a1: WRONG,
      a2: BIG,
      a3: CALC_FIX,
    });
    release();
    await app.idle();
    const run = await runOf('together', n);
    const ids = [1, 2, 3].map((k) => `${run.id}-a${k}`);
    expect(
      deps.calls
        .slice(calls)
        .map((c) => c.runId)
        .sort(),
    ).toEqual(ids);
    expect(recordedAttempts(run).map((a) => [a.run_id, a.verdict, a.published])).toEqual([
      [ids[0], 'regression', false],
      [ids[1], 'verified', false],
      [ids[2], 'verified', true],
    ]);
    for (const id of ids) expect(traceOf(id)).toContain('"stop_reason":"completed"');
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    expect(run.cost_usd).toBeCloseTo(0.0012, 10);
    expect(emu.pulls.filter((p) => p.pull && p.body?.includes(run.id))).toHaveLength(1);
    const status = emu.comments(n, `${O}/together`).filter((c) => c.user === emu.botLogin);
    expect(status).toHaveLength(1);
    expect(status[0]!.body).toContain('Attempt 3 of 3 published');
  });

  it('the cost limit holds for attempts running at once: once they spent it, the waiting one never starts', async () => {
    const { n, calls, release } = await twoAtOnce('spent', 'attempts: 3\nmax_cost_usd: 0.0007\n', {
      a1: WRONG,
      a2: WRONG,
      a3: CALC_FIX,
    });
    release();
    await app.idle();
    const run = await runOf('spent', n);
    expect(deps.calls.length).toBe(calls + 2);
    const attempts = recordedAttempts(run);
    expect(attempts[2]).toMatchObject({ verdict: 'not_run', published: false });
    expect(attempts[2]!.reason).toContain('spent the cost limit');
    expect(run.cost_usd).toBeCloseTo(0.0008, 10);
    expect(run.pr_number).toBeNull();
  });

  it('cancel stops both running attempts, their traces written, and the one waiting never starts', async () => {
    const { n, calls, release } = await twoAtOnce('halt', 'attempts: 3\n', {
      a1: CALC_FIX,
      a2: CALC_FIX,
      a3: CALC_FIX,
    });
    try {
      await emu.comment(O, 'halt', n, '/agenticfix cancel', 'maint');
      await app.idle();
    } finally {
      release();
    }
    const run = await runOf('halt', n);
    expect(run).toMatchObject({ state: 'cancelled', pr_number: null });
    expect(deps.calls.length).toBe(calls + 2);
    expect(recordedAttempts(run).map((a) => a.verdict)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    for (const c of deps.calls.slice(calls)) expect(traceOf(c.runId!)).toContain('"stop_reason":"cancelled"');
  });
});
