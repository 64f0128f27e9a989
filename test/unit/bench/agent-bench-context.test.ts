import { benchContext } from '../../../src/bench/context.js';
import { ledgerLongTrajectory, ledgerTrajectory } from '../../../src/bench/ledger.js';

// Token counts are deterministic for the fixed trajectories, so the policy's targets are asserted here
// (they are properties of the policy, not timings).
describe('context policy benchmark (ledger: 190 KB source, 606 tests, 25 and 58 calls)', () => {
  it('sends at most 40 % of the full history, bills near the floor with prompt caching, forces no re-read', async () => {
    expect(ledgerTrajectory()).toHaveLength(25);
    expect(ledgerLongTrajectory()).toHaveLength(58);
    const r = (await benchContext()) as Record<string, number>;
    expect(r.cached_price).toBe(0.1);
    expect(r.prompt_tokens_full_history).toBeGreaterThan(300_000);
    expect(r.raw_ratio).toBeLessThanOrEqual(0.4);
    expect(r.billed_tokens_context_policy).toBeLessThan(r.prompt_tokens_context_policy!);
    expect(r.billed_ratio).toBeCloseTo(r.billed_tokens_context_policy! / r.billed_tokens_full_history!, 2);
    // No policy that shows each result once bills under the floor; this one stays within 0.07 of it
    // (0.055 when it forced a re-read: the file heads and lines shown again around matches cost 0.014,
    // about what the one re-read's turn costs a real model).
    expect(r.billed_ratio_floor).toBeLessThan(r.billed_ratio!);
    expect(r.billed_ratio! - r.billed_ratio_floor!).toBeLessThanOrEqual(0.07);
    expect(r['billed_ratio_at_cached_price_0.25']).toBeLessThanOrEqual(0.5);
    // Found: every older result was a stub, so the issue file had to be read again (2 forced re-reads);
    // then the function to fix, a window of a page compacted since (1): a search into it shows it again.
    expect(r.rereads).toBe(0);
    expect(r.rereads_full_history).toBe(0);
    // The parts add up to the billed total (give or take a token a request: prompts count whole tokens).
    const totals = {
      policy: r.billed_tokens_context_policy!,
      full: r.billed_tokens_full_history!,
      floor: r.billed_tokens_floor!,
    };
    for (const [run, total] of Object.entries(totals)) {
      const parts = Object.entries(r).filter(([k]) => k.startsWith(`billed_${run}_`));
      expect(parts).toHaveLength(7);
      expect(Math.abs(parts.reduce((n, [, v]) => n + v, 0) - total)).toBeLessThanOrEqual(r.tool_calls! + 1);
    }
    // The floor carries no result and no note: what it bills is what both runs pay.
    expect(r.billed_floor_notes).toBe(0);
    expect(r.billed_floor_results_cached).toBeLessThan(r.billed_full_results_cached! / 20);
    expect(r.billed_ratio_floor).toBeCloseTo(totals.floor / totals.full, 2);
    expect(r.shared_cut_for_floor_half).toBe(Math.max(0, 2 * totals.floor - totals.full));
    expect(r.shared_cut_for_half).toBe(Math.max(0, 2 * totals.policy - totals.full));
    // The longer trajectory: the full history grows about quadratically, the policy about linearly.
    expect(r.long_tool_calls).toBe(58);
    expect(r.long_billed_ratio).toBeLessThanOrEqual(0.5);
    expect(r.long_billed_ratio).toBeLessThan(r.billed_ratio!);
    expect(r.long_billed_ratio! - r.long_billed_ratio_floor!).toBeLessThanOrEqual(0.1);
    // Found: 5, three of them windows the model had read a few turns before; then 2, windows inside a
    // page read long before (keeping pages whole cost 0.726): the function it had just searched for, and
    // a test file's imports, which the page's stub now keeps as the file's head.
    expect(r.long_rereads).toBe(0);
    expect(r.long_rereads_full_history).toBe(0);
  }, 240_000);
});
