import { recordedAttempts } from '../../../src/pipeline/attempts.js';
import { requestCostUsd } from '../../../src/agent/tokens.js';
import type { Usage } from '../../../src/agent/model.js';
import type { ModelPrice } from '../../../src/config/prices.js';
import { calcFixScript, CALC_CONFIG, CALC_FILES } from '../../support/app.js';
import { startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * Issue 41, item 1: `models: [m-one, m-two]` in the repository config mixes models across attempts. The
 * real repair against the scripted model: each attempt's requests name its model, each is priced at
 * its model's price, and the attempt's model is recorded and shown in the status and the attempts table.
 * The two attempts run at once in the app's two slots (AGENTICFIX_CONCURRENCY's default), through the
 * real pipeline: each prepares, repairs and is judged beside the other.
 */
const PRICES: Record<string, ModelPrice> = {
  'm-one': { input: 1, cached_input: 0.1, output: 1 },
  'm-two': { input: 10, cached_input: 1, output: 10 },
};

describe('models per attempt through the app', () => {
  const O = 'acme';
  let world: AppWorld;
  /** Whether an attempt's first request came while the other's was held (both attempts asking at once). */
  let together = false;
  let held: (() => void) | null = null;
  const holdFirst = (body: unknown): Promise<void> | undefined => {
    const messages = (body as { messages: { role: string }[] }).messages;
    if (messages.some((m) => m.role === 'assistant')) return; // not a conversation's first request
    if (held) return void ((together = true), held());
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => release(), 5000); // attempts one after another: waited in vain
      const release = () => ((held = null), clearTimeout(timer), resolve());
      held = release;
    });
  };

  beforeAll(async () => {
    const fix = calcFixScript('Changed `add` to add.');
    world = await startAppWorld({
      // Two attempts, each the same fix (read, edit, finish), at once in the app's two slots.
      script: [],
      scripted: { instances: [fix, fix], onRequest: (_i, body) => holdFirst(body) },
      modelName: 'operator-model',
      env: {
        AGENTICFIX_MODEL_ALLOWLIST: 'm-one,m-two',
        AGENTICFIX_MODEL_PRICES: JSON.stringify(PRICES),
        AGENTICFIX_MAX_ATTEMPTS: '2',
        AGENTICFIX_MAX_COST_USD: '5',
      },
    });
  });
  afterAll(() => world?.close());

  it('attempt n asks models[(n-1) mod 2], is priced at that model, and says so in the status and the table', async () => {
    const { emu, app } = world;
    const model = world.model!;
    emu.createRepo(O, 'mixed', {
      files: {
        ...CALC_FILES,
        '.github/agenticfix.yml': `${CALC_CONFIG}attempts: 2\nmodels: [m-one, m-two]\n`,
      },
    });
    emu.setPermission(O, 'mixed', 'maint', 'write');
    const n = emu.createIssue(O, 'mixed', { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, 'mixed', n, 'agenticfix', 'maint');
    await app.idle();
    const [run] = await app.store.forIssue(O, 'mixed', n);
    expect(together).toBe(true);
    // Each attempt's requests named its own model (3 each: read, edit, finish), never the operator's.
    const asked = model.requests
      .filter((r) => r.path === '/v1/chat/completions')
      .map((r) => (r.body as { model: string }).model);
    expect(asked.sort()).toEqual(['m-one', 'm-one', 'm-one', 'm-two', 'm-two', 'm-two']);
    const attempts = recordedAttempts(run!);
    expect(attempts.map((a) => [a.model, a.verdict])).toEqual([
      ['m-one', 'verified'],
      ['m-two', 'verified'],
    ]);
    // Priced per model: each reply of an attempt (in its own events, under its id) at its model's price.
    for (const a of attempts) {
      const replies = (await app.store.events(a.run_id, 0, 1000)).filter((e) => e.type === 'model_reply');
      expect(replies).toHaveLength(3);
      const priced = replies.map((r) => requestCostUsd(PRICES[a.model!]!, r.body.usage as Usage));
      expect(replies.map((r) => r.body.cost_usd)).toEqual(priced);
      expect(a.cost_usd).toBeCloseTo(
        priced.reduce((x, y) => x + y, 0),
        12,
      );
    }
    // The same patch at a higher price: the cheaper attempt is the one published.
    const [one, two] = attempts.map((a) => a.cost_usd!);
    expect(two).toBeGreaterThan(one!);
    expect(attempts.map((a) => a.published)).toEqual([true, false]);
    expect(run!.cost_usd).toBeCloseTo(one! + two!, 10);
    const status = emu.comments(n, `${O}/mixed`).find((c) => c.user === emu.botLogin)!.body;
    expect(status).toMatch(/Attempt 1 \([^)]*\): `verified` \(published\), model `m-one`/);
    expect(status).toMatch(/Attempt 2 \([^)]*\): `verified`, model `m-two`/);
    const evidence = emu
      .comments(run!.pr_number!, `${O}/mixed`)
      .find((c) => c.body.startsWith('## Test evidence'))!.body;
    expect(evidence).toContain('| # | Verdict | Model |');
    expect(evidence).toMatch(/^\| 1 \(published\) \| `verified` \| `m-one` \|/m);
    expect(evidence).toMatch(/^\| 2 \| `verified` \| `m-two` \|/m);
  });
});
