import { benchContext } from '../../../src/bench/context.js';
import { ledgerTrajectory } from '../../../src/bench/ledger.js';

// Token counts are deterministic for the fixed trajectory, so the policy's targets are asserted here
// (they are properties of the policy, not timings).
describe('context policy benchmark (ledger: 190 KB source, 606 tests, 25 calls)', () => {
  it('sends at most 40 % of the full history, and bills at most 60 % of it with prompt caching', async () => {
    expect(ledgerTrajectory()).toHaveLength(25);
    const r = await benchContext();
    expect(r.prompt_tokens_full_history).toBeGreaterThan(300_000);
    expect(r.ratio_raw_policy_to_full).toBeLessThanOrEqual(0.4);
    expect(r.ratio_billed_policy_to_full).toBeLessThanOrEqual(0.6);
    expect(r.billed_tokens_context_policy).toBeLessThan(r.prompt_tokens_context_policy!);
    expect(r.ratio_billed_policy_to_full).toBeCloseTo(
      r.billed_tokens_context_policy! / r.billed_tokens_full_history!,
      2,
    );
  }, 120_000);
});
