import { rmSync } from 'node:fs';
import { parseRepoConfig } from '../../../src/config/repo-config.js';
import { attemptModel, runModels } from '../../../src/pipeline/attempt-model.js';
import { publishExtra, recordedAttempts, type Attempt } from '../../../src/pipeline/attempts.js';
import type { RunContext } from '../../../src/pipeline/context.js';
import { tempDir, testConfig } from '../../support/app.js';

/** An attempt as stored before attempts had a model. */
const OLD = {
  n: 1,
  run_id: 'r-a1',
  verdict: 'verified',
  reason: 'ok',
  stop_reason: 'completed',
  changed_lines: 2,
  changed_files: 1,
  f2p: 1,
  p2p: 3,
  cost_usd: 0.01,
  duration_ms: 10,
  published: true,
};

/** Issue 41, item 1: `models: [a, b]` mixes models across attempts, each from the operator's allow-list. */
describe('models per attempt', () => {
  const home = tempDir('attempt-models-unit-');
  afterAll(() => rmSync(home, { recursive: true, force: true }));
  const operator = testConfig(home, { AGENTICFIX_MODEL_ALLOWLIST: 'm-one,m-two,m-three' });

  it('attempt n uses models[(n-1) mod length]; a rerun command’s model= is every attempt’s; else `model`', () => {
    const rc = { models: ['m-one', 'm-two'] };
    expect([1, 2, 3, 4].map((n) => attemptModel(n, { model: null }, rc))).toEqual([
      'm-one',
      'm-two',
      'm-one',
      'm-two',
    ]);
    expect(attemptModel(2, { model: 'm-three' }, rc)).toBe('m-three');
    expect(attemptModel(2, { model: null }, { model: 'm-two' })).toBe('m-two');
    expect(attemptModel(2, { model: null }, {})).toBeNull();
    expect(runModels({ model: null }, { models: ['m-one', 'm-two', 'm-one'] })).toEqual(['m-one', 'm-two']);
    expect(runModels({ model: 'm-three' }, rc)).toEqual(['m-three']);
    expect(runModels({ model: null }, {})).toEqual([null]);
  });

  it('`models` entries off the allow-list are refused as `model` is, each named; `model` with `models` is refused', () => {
    expect(parseRepoConfig('models: [m-one, m-two]\n', operator)).toMatchObject({
      ok: true,
      config: { models: ['m-one', 'm-two'] },
    });
    const off = parseRepoConfig('models: [m-one, gpt-x, "<b>y</b>"]\n', operator);
    expect(off.ok).toBe(false);
    const error = !off.ok ? off.error : '';
    expect(error).toContain('asks for more than the operator allows');
    const allowed = "the operator's allowed models: `m-one`, `m-two`, `m-three`";
    expect(error).toContain(`- \`models\`: \`gpt-x\` is not among ${allowed}`);
    expect(error).toContain(`- \`models\`: \`<b>y</b>\` is not among ${allowed}`);
    // The same message as `model`'s.
    const single = parseRepoConfig('model: gpt-x\n', operator);
    expect(!single.ok && single.error).toContain(`- \`model\`: \`gpt-x\` is not among ${allowed}`);
    const both = parseRepoConfig('model: m-one\nmodels: [m-two]\n', operator);
    expect(!both.ok && both.error).toContain('- `models`: set `model` or `models`, not both');
    expect(parseRepoConfig('models: []\n', operator).ok).toBe(false);
  });

  it('the attempts table and the status lines link each attempt to its own page, with its model', () => {
    const c = {
      s: { config: { web: { publicUrl: 'https://fix.example' } } },
      run: { id: 'r' },
    } as RunContext;
    const attempt = (n: number, model: string | null): Attempt => ({
      ...recordedAttempts({
        attempts: JSON.stringify([{ ...OLD, n, run_id: `r-a${n}`, published: n === 2 }]),
      })[0]!,
      model,
    });
    const extra = publishExtra(c, [attempt(1, 'm-one'), attempt(2, null)]);
    for (const n of [1, 2]) {
      expect(extra.evidence[0]).toContain(`[r-a${n}](https://fix.example/runs/r-a${n})`);
      expect(extra.status).toContain(`- Attempt ${n} ([r-a${n}](https://fix.example/runs/r-a${n}))`);
    }
    expect(extra.evidence[0]).toMatch(/^\| 1 \| `verified` \| `m-one` \|/m);
    expect(extra.evidence[0]).toMatch(/^\| 2 \(published\) \| `verified` \| n\/a \|/m);
    expect(extra.status).toContain('`verified`, model `m-one`, 2 changed lines');
  });

  it('attempts recorded before `model` existed still parse (model: null)', () => {
    expect(recordedAttempts({ attempts: JSON.stringify([OLD]) })).toEqual([{ ...OLD, model: null }]);
  });
});
