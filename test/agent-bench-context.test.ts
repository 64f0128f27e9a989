import { benchContext, benchTrajectory } from '../src/bench/context.js';

describe('context policy benchmark', () => {
  it('replays the same ~20-call trajectory with and without the policy and measures prompt tokens', async () => {
    expect(benchTrajectory()).toHaveLength(20);
    const r = await benchContext();
    expect(r.prompt_tokens_context_policy).toBeGreaterThan(0);
    expect(r.prompt_tokens_context_policy).toBeLessThan(r.prompt_tokens_full_history!);
    expect(r.ratio_policy_to_full).toBeCloseTo(
      r.prompt_tokens_context_policy! / r.prompt_tokens_full_history!,
      2,
    );
  });
});
