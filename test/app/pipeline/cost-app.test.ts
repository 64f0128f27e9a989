import type { RunningApp } from '../../../src/app.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { CALC_CONFIG, CALC_FIX, fakeDeps } from '../../support/app.js';
import { calcRepo, PRICED_MODEL_ENV, startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * What the app does with cost: the operator's limit and the repository's lower one reach the run, the
 * run's cost reaches the store and the pull request's trace comment, and a run whose cost could not be
 * counted against its limit is refused before anything runs. The repair is the fast stand-in (its cost
 * is $0.0004); the loop's own cost stop is in agent-loop.test.ts and repair.test.ts.
 */
describe('cost through the app', () => {
  const O = 'acme';
  let emu: GitHubEmulator;
  let app: RunningApp;
  let world: AppWorld;
  const deps = fakeDeps({ edits: () => CALC_FIX });

  beforeAll(async () => {
    world = await startAppWorld({
      deps,
      env: {
        ...PRICED_MODEL_ENV,
        AGENTICFIX_MODEL_NAME: 'unpriced-model',
        AGENTICFIX_MODEL_ALLOWLIST: 'unpriced-model,priced-model',
        AGENTICFIX_MAX_COST_USD: '1',
      },
    });
    ({ emu, app } = world);
  });
  afterAll(() => world?.close());

  async function labelled(repo: string, config: string) {
    calcRepo(emu, O, repo, { config: CALC_CONFIG + config, permission: 'write' });
    const n = emu.createIssue(O, repo, { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, repo, n, 'agenticfix', 'maint');
    await app.idle();
    const [run] = await app.store.forIssue(O, repo, n);
    return { n, run: run! };
  }

  it("a priced model: the repository's lower limit reaches the run, its cost the store and the trace comment", async () => {
    const calls = deps.calls.length;
    const { run } = await labelled('priced', 'model: priced-model\nmax_cost_usd: 0.5\n');
    expect(deps.calls).toHaveLength(calls + 1);
    expect(deps.calls.at(-1)!.budgets).toMatchObject({ costUsd: 0.5 });
    expect(run).toMatchObject({ state: 'done', verdict: 'verified', cost_usd: 0.0004 });
    const trace = emu
      .comments(run.pr_number!, `${O}/priced`)
      .map((c) => c.body)
      .find((b) => b.startsWith('## Trace summary'))!;
    expect(trace).toContain('- Cost: $0.0004 at 2 input, 0.5 cached input, 10 output USD per million tokens');
    expect(trace).toContain('| 1 | 100 |  | 20 | 120 | $0.0004 |');
    const configuration = emu
      .comments(run.pr_number!, `${O}/priced`)
      .map((c) => c.body)
      .find((b) => b.startsWith('## Run configuration'))!;
    expect(configuration).toContain('costUsd=0.5');
  });

  it('the operator set a cost limit and the model has no price: refused before anything runs, saying why', async () => {
    const calls = deps.calls.length;
    const { n, run } = await labelled('unpriced', '');
    expect(deps.calls).toHaveLength(calls);
    expect(run).toMatchObject({ state: 'failed', cost_usd: null });
    const status = emu
      .comments(n, `${O}/unpriced`)
      .map((c) => c.body)
      .find((b) => b.includes('### AgenticFix'))!;
    expect(status).toContain('❌ Failed');
    expect(status).toContain(
      'Cannot run; nothing was run. The run may spend at most 1 USD, and model `unpriced-model` has no price to count it by: the operator can add one with AGENTICFIX_MODEL_PRICES.',
    );
  });
});
