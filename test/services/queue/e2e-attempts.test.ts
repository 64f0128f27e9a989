import {
  calculatorAttemptCalls,
  calculatorScript,
  CALCULATOR_TEST_ARGV,
  repoSource,
} from '../../../src/demo/calculator.js';
import { startScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { recordedAttempts } from '../../../src/pipeline/attempts.js';
import { branchFor } from '../../../src/publish/pr.js';
import {
  needDistributed,
  OWNER as O,
  startDistributedWorld,
  type DistributedWorld,
} from '../../support/distributed-world.js';
import { describeIf } from '../../support/skip.js';

/**
 * Attempts as jobs (issue 41, item 2): `serve` (this process) enqueues on Redis, two `agenticfix
 * worker` processes (the built CLI) take the run and its attempts, each attempt a job of its own on
 * whichever worker is free, in the real Docker sandbox; the run store is PostgreSQL. The scripted model
 * hands each attempt's conversation one of three scripts (a regression, a verified fix with a comment,
 * the smallest verified fix), in the order the attempts start.
 */

const WAIT_MS = 300_000;

const needs = await needDistributed();
describeIf(needs)('attempts as jobs: serve + two workers (BullMQ, PostgreSQL)', () => {
  let world: DistributedWorld;
  const more = 'attempts: 3\n';

  beforeAll(async () => {
    world = await startDistributedWorld({
      name: 'e2e-att',
      model: (config) =>
        startScriptedModelServer([], {
          model: 'scripted',
          instances: [1, 2, 3].map((k) =>
            calculatorScript(config.sandbox.baseImage, calculatorAttemptCalls(k), `attempt ${k}`),
          ),
        }),
      repos: {
        calc: (home) => repoSource(home, CALCULATOR_TEST_ARGV, { more }),
        slow: (home) => repoSource(home, ['node', '-e', 'setTimeout(() => {}, 600000)'], { more }),
      },
    });
  }, 300_000);

  afterAll(() => world?.close(), 120_000);

  it('three attempts run on both workers, each judged on its own; one pull request with the smallest verified patch', async () => {
    const { emu, bot } = world;
    const n = await world.labelled('calc', 'subtract is wrong');
    const run = await world.runOf('calc', n, WAIT_MS);
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    const attempts = recordedAttempts(run);
    // Each attempt's verdict in the store, with the worker that ran it: both workers ran attempts.
    expect(attempts.map((a) => a.verdict).sort()).toEqual(['regression', 'verified', 'verified']);
    expect(new Set(attempts.map((a) => a.worker))).toEqual(new Set(['w1', 'w2']));
    const verified = attempts.filter((a) => a.verdict === 'verified');
    const smallest = verified.reduce((a, b) => (a.changed_lines <= b.changed_lines ? a : b));
    expect(verified[0]!.changed_lines).not.toBe(verified[1]!.changed_lines);
    expect(attempts.filter((a) => a.published)).toEqual([smallest]);
    expect(attempts.every((a) => a.publish === undefined)).toBe(true); // dropped with the choice
    // One draft pull request, of the smallest patch, with a table of three attempts.
    const prs = emu.pulls.filter((p) => p.repo === `${O}/calc` && p.pull?.head === branchFor(n));
    expect(prs).toHaveLength(1);
    expect(run.pr_number).toBe(prs[0]!.number);
    expect(run.patch_path).toContain(`${smallest.run_id}/`);
    const evidence = bot('calc', run.pr_number!).find((b) => b.startsWith('## Test evidence'))!;
    expect(evidence.split('\n').filter((l) => /^\| \d/.test(l))).toHaveLength(3);
    const status = bot('calc', n);
    expect(status).toHaveLength(1);
    expect(status[0]).toContain(`Attempt ${smallest.n} of 3 published`);
  }, 600_000);

  it('/agenticfix cancel stops every attempt, on both workers', async () => {
    const { emu, app } = world;
    const n = await world.labelled('slow', 'slow: cancel me');
    // The repository's tests never end: every attempt is mid-run once it tests.
    const run = await world.whenTesting('slow', n, WAIT_MS, 3);
    expect(await world.cancel('slow', n, run.id, 60_000)).toBeLessThan(60_000);
    const attempts = recordedAttempts((await app.store.get(run.id))!);
    expect(attempts.map((a) => a.verdict)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(new Set(attempts.map((a) => a.worker))).toEqual(new Set(['w1', 'w2']));
    expect(emu.branchHead(O, 'slow', branchFor(n))).toBeNull();
  }, 600_000);
});

/**
 * The cost limit holds for the attempts together while they run on both workers (issue 41, item 5): one
 * run at a time per worker, so two attempts run at once and the third waits for a slot. Each model reply
 * is priced at $0.001 and comes after a pause, so the two running attempts spend the limit together,
 * long before either spends it alone.
 */
describeIf(needs)('the cost limit over attempts on two workers', () => {
  let world: DistributedWorld;
  const REPLY_USD = 0.001;
  const LIMIT_USD = 0.006;
  const files = ['src/calculator.js', 'package.json', 'test/calculator.test.js', 'ISSUE.md'];
  // Reads in turn (no loop to notice), each reply 1,000 prompt tokens at $1 per million; a finish
  // never reached.
  const spending = [
    ...Array.from({ length: 40 }, (_, i) => ({
      tool_calls: [{ name: 'read_file', arguments: { path: files[i % files.length]! } }],
      usage: { prompt_tokens: 1000, completion_tokens: 0, cached_tokens: 0 },
      delay_ms: 300,
    })),
    { tool_calls: [{ name: 'finish', arguments: { summary: 'spent' } }] },
  ];

  beforeAll(async () => {
    world = await startDistributedWorld({
      name: 'e2e-att-cost',
      concurrency: 1,
      env: {
        AGENTICFIX_MODEL_PRICES: JSON.stringify({ scripted: { input: 1, cached_input: 1, output: 1 } }),
      },
      model: () => startScriptedModelServer([], { model: 'scripted', instances: [spending] }),
      repos: {
        costly: (home) =>
          repoSource(home, CALCULATOR_TEST_ARGV, { more: `attempts: 3\nmax_cost_usd: ${LIMIT_USD}\n` }),
      },
    });
  }, 300_000);

  afterAll(() => world?.close(), 120_000);

  it('the running attempts stop at the limit, the third never starts, no pull request', async () => {
    const { emu, model, bot } = world;
    const n = await world.labelled('costly', 'subtract is wrong');
    const run = await world.runOf('costly', n, WAIT_MS);
    expect(run).toMatchObject({ state: 'done', pr_number: null });
    const attempts = recordedAttempts(run);
    const [ran, waited] = [attempts.slice(0, 2), attempts[2]!];
    // Attempts 1 and 2 ran at once, one on each worker, and were stopped for what they spent together.
    expect(ran.map((a) => a.verdict)).toEqual(['cost_limit', 'cost_limit']);
    expect(new Set(ran.map((a) => a.worker))).toEqual(new Set(['w1', 'w2']));
    for (const a of ran) {
      expect(a.reason).toContain('the attempts together spent the cost limit ($0.0060)');
      expect(a.cost_usd!).toBeLessThan(LIMIT_USD); // neither spent it alone
    }
    expect(waited).toMatchObject({ verdict: 'not_run', cost_usd: null });
    expect(waited.reason).toContain('Not started: the attempts before it spent the cost limit');
    // Two conversations, never a third.
    const started = model.requests.filter((r) => {
      const { messages } = (r.body ?? {}) as { messages?: { role: string }[] };
      return messages !== undefined && !messages.some((m) => m.role === 'assistant');
    });
    expect(started).toHaveLength(2);
    // The total reaches the limit and passes it by at most the reply each running attempt had in flight.
    expect(run.cost_usd!).toBeGreaterThanOrEqual(LIMIT_USD - 1e-9);
    expect(run.cost_usd!).toBeLessThanOrEqual(LIMIT_USD + ran.length * REPLY_USD + 1e-9);
    expect(run.cost_usd!).toBeCloseTo(
      ran.reduce((sum, a) => sum + a.cost_usd!, 0),
      9,
    );
    expect(emu.pulls.filter((p) => p.repo === `${O}/costly`)).toEqual([]);
    expect(emu.branchHead(O, 'costly', branchFor(n))).toBeNull();
    expect(bot('costly', n).join('\n')).toContain('No attempt was verified; no pull request was opened.');
  }, 600_000);
});
