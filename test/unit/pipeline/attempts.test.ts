import { rmSync } from 'node:fs';
import type { RepairResult } from '../../../src/agent/types.js';
import {
  attemptCount,
  changedLines,
  choose,
  recordedAttempts,
  runAttempt,
  runOfLabel,
  type Attempt,
  type AttemptSteps,
} from '../../../src/pipeline/attempts.js';
import type { RunContext } from '../../../src/pipeline/context.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { parseRepoConfig } from '../../../src/config/repo-config.js';
import { parseCommand } from '../../../src/webhook/commands.js';
import type { RunRecord } from '../../../src/store/store.js';
import { tempDir, testConfig } from '../../support/app.js';

/** The rules of several attempts that need no app: the choice, the count, the sizes and the ceilings. */
describe('attempts', () => {
  const home = tempDir('attempts-unit-');
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  const attempt = (n: number, o: Partial<Attempt>): Attempt => ({
    n,
    run_id: `r-a${n}`,
    verdict: 'verified',
    reason: '',
    stop_reason: 'completed',
    changed_lines: 10,
    changed_files: 1,
    f2p: 1,
    p2p: 4,
    cost_usd: 0.1,
    duration_ms: 1,
    published: false,
    model: null,
    ...o,
  });

  it('chooses the smallest verified patch: changed lines, then files, then cost; none verified, none', () => {
    expect(
      choose([
        attempt(1, { verdict: 'regression', changed_lines: 1 }),
        attempt(2, { changed_lines: 8 }),
        attempt(3, { changed_lines: 4, changed_files: 2 }),
        attempt(4, { changed_lines: 4, changed_files: 1, cost_usd: 0.3 }),
        attempt(5, { changed_lines: 4, changed_files: 1, cost_usd: 0.2 }),
      ])?.n,
    ).toBe(5);
    expect(
      choose([attempt(1, { verdict: 'no_reproduction' }), attempt(2, { verdict: 'empty_patch' })]),
    ).toBeNull();
  });

  it('counts changed lines, not the file headers', () => {
    const patch = [
      'diff --git a/x.py b/x.py',
      '--- a/x.py',
      '+++ b/x.py',
      '@@ -1,2 +1,2 @@',
      ' def f():',
      '-    return 1',
      '+    return 2',
      '+# --- not a header',
      '',
    ].join('\n');
    expect(changedLines(patch)).toBe(3);
    expect(changedLines('')).toBe(0);
  });

  it("a rerun's number wins over the repository's; a revision makes one attempt", () => {
    const run = (o: Partial<RunRecord>) => ({ revision: null, attempts_asked: null, ...o }) as RunRecord;
    expect(attemptCount(run({}), { attempts: 3 })).toBe(3);
    expect(attemptCount(run({ attempts_asked: 2 }), { attempts: 3 })).toBe(2);
    expect(attemptCount(run({ revision: 1, attempts_asked: 2 }), { attempts: 3 })).toBe(1);
  });

  it("an attempt's engine labels belong to its run", () => {
    const id = '20261206T025843123Z-0a1b2c3d';
    for (const label of [id, `${id}-verify`, `${id}-a2`, `${id}-a12-verify`])
      expect(runOfLabel(label)).toBe(id);
  });

  it('refuses `attempts` over AGENTICFIX_MAX_ATTEMPTS by name, and attempts=N over it or below 1 in a rerun', () => {
    const operator = testConfig(home, { AGENTICFIX_MAX_ATTEMPTS: '2' });
    const r = parseRepoConfig('attempts: 3\n', operator);
    expect(!r.ok && r.error).toContain("`attempts`: 3 exceeds the operator's ceiling of 2 attempts");
    expect(parseRepoConfig('attempts: 2\nattempts_policy: first_verified\n', operator)).toMatchObject({
      ok: true,
      config: { attempts: 2, attempts_policy: 'first_verified' },
    });
    expect(parseRepoConfig('attempts: 0\n', operator).ok).toBe(false);
    expect(parseRepoConfig('attempts_policy: best\n', operator).ok).toBe(false);
    expect(parseCommand('/agenticfix rerun attempts=3 model=m1')).toEqual({
      type: 'command',
      command: { kind: 'rerun', attempts: 3, model: 'm1' },
    });
    for (const bad of ['attempts=0', 'attempts=two', 'attempts=1.5'])
      expect(parseCommand(`/agenticfix rerun ${bad}`)).toMatchObject({ type: 'invalid' });
  });

  // Issue 41, item 2: attempts run at once on several workers; the cost limit and first_verified held
  // only between attempts run one after another in one process.
  describe('attempts running at once (other workers simulated through the store)', () => {
    const limit = 0.001;
    async function setup(policy: 'all' | 'first_verified') {
      const store = new SqliteRunStore(':memory:');
      const run = await store.update(
        (
          await store.createRun({
            owner: 'acme',
            repo: 'calc',
            issue: 1,
            installation_id: 1,
            trigger: 'label',
            triggered_by: 'alice',
            delivery_id: `d-${Math.random()}`,
            base_commit: 'a'.repeat(40),
          })
        ).id,
        { state: 'running' },
      );
      const c = {
        s: { store },
        run,
        rc: { attempts: 3, attempts_policy: policy },
        budgets: { tokens: 1000, requests: 10, toolCalls: 10, timeMs: 60_000, costUsd: limit },
        signal: new AbortController().signal,
        status: { update: () => undefined },
      } as unknown as RunContext;
      const other = (n: number, o: Partial<Attempt>) =>
        store.putAttempt(run.id, { ...attempt(n, o), run_id: `${run.id}-a${n}`, worker: 'w2' });
      return { store, run, c, other };
    }
    /** A repair that spends in steps (`during` runs after the first), then waits until it is stopped. */
    const spending = (budgets: (number | null)[], during: () => Promise<unknown>): AttemptSteps => ({
      async repair(ac, a) {
        budgets.push(a.budgets.costUsd);
        a.spent(0.0001);
        await during();
        a.spent(0.0002);
        await new Promise((r) => ac.signal.addEventListener('abort', r, { once: true }));
        return {
          run_id: a.runId,
          stop_reason: 'cancelled',
          patch: '',
          cost_usd: 0.0002,
          duration_ms: 5,
        } as RepairResult;
      },
      pending: () => '{}',
    });

    it('the cost limit holds for attempts together: a running one stops when the others spend it, the next does not start', async () => {
      const { store, run, c, other } = await setup('all');
      await other(2, { verdict: 'running', cost_usd: 0.0006 });
      const budgets: (number | null)[] = [];
      const steps = spending(budgets, () => other(2, { verdict: 'running', cost_usd: 0.0009 }));
      await runAttempt(c, 1, 'w1', steps);
      expect(budgets).toHaveLength(1);
      expect(budgets[0]).toBeCloseTo(0.0004, 10); // what the other left when it started
      await runAttempt(c, 3, 'w1', steps);
      expect(budgets).toHaveLength(1); // attempt 3 never repaired
      const attempts = recordedAttempts((await store.get(run.id))!);
      expect(attempts.map((a) => [a.n, a.verdict, a.worker])).toEqual([
        [1, 'cost_limit', 'w1'],
        [2, 'running', 'w2'],
        [3, 'not_run', 'w1'],
      ]);
      expect(attempts[0]!.reason).toContain('the attempts together spent the cost limit ($0.0010)');
      expect(attempts[0]!.cost_usd).toBeCloseTo(0.0002, 10);
      expect(attempts[2]!.reason).toContain('spent the cost limit');
      await store.close();
    });

    it('an attempt stops once its run has ended elsewhere (its worker died, serve ended the run)', async () => {
      const { store, run, c } = await setup('all');
      const ended = () => store.update(run.id, { state: 'interrupted', error: 'its worker (w9) stopped' });
      await runAttempt(c, 2, 'w1', spending([], ended));
      const [attempt] = recordedAttempts((await store.get(run.id))!);
      expect(attempt).toMatchObject({ n: 2, verdict: 'run_over', worker: 'w1' });
      await store.close();
    });

    it('first_verified: a running attempt stops once another is verified, and the next does not start', async () => {
      const { store, run, c, other } = await setup('first_verified');
      const steps = spending([], () => other(2, { verdict: 'verified', cost_usd: 0 }));
      await runAttempt(c, 1, 'w1', steps);
      await runAttempt(c, 3, null, steps);
      const attempts = recordedAttempts((await store.get(run.id))!);
      expect(attempts.map((a) => [a.n, a.verdict])).toEqual([
        [1, 'first_verified'],
        [2, 'verified'],
        [3, 'not_run'],
      ]);
      expect(attempts[0]!.reason).toContain('another attempt was verified first');
      await store.close();
    });
  });
});
