import { cutText, renderObservation } from '../../../src/tools/observation.js';
import { fail, ok } from '../../../src/tools/types.js';

const lines = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => `${prefix} line ${i + 1}`).join('\n');

describe('observation capping', () => {
  it('returns a small result unchanged', () => {
    const r = ok({ a: 'short' });
    expect(renderObservation(r, 1000)).toBe(JSON.stringify(r));
  });

  it('cuts only the growing fields, keeps head and tail of output, and the envelope whole', () => {
    const stdout = `${lines(2000, 'progress')}\n==== 2 failed, 727 passed in 3.1s ====`;
    const r = fail('timeout', 'tests did not finish', {
      status: 'failed',
      summary: { passed: 727, failed: 2 },
      stdout,
      stderr: 'warning: something on stderr',
    });
    const text = renderObservation(r, 4000);
    expect(text.length).toBeLessThanOrEqual(4000);
    const o = JSON.parse(text);
    expect(o).toMatchObject({
      success: false,
      error_code: 'timeout',
      error: 'tests did not finish',
      truncated: true,
      fatal: false,
    });
    expect(o.data.summary).toEqual({ passed: 727, failed: 2 });
    expect(o.data.stderr).toBe('warning: something on stderr');
    expect(o.data.stdout.startsWith('progress line 1\n')).toBe(true);
    expect(o.data.stdout.endsWith('==== 2 failed, 727 passed in 3.1s ====')).toBe(true);
    expect(o.data.stdout).toMatch(/^\[\.\.\. \d+ lines of output cut \.\.\.\]$/m);
    // Output keeps more of its tail than its head: the verdict is at the end.
    const [head, tail] = o.data.stdout.split(/\[\.\.\. \d+ lines of output cut \.\.\.\]/);
    expect(tail.length).toBeGreaterThan(head.length * 2);
  });

  it('cuts lists to whole head and tail entries with a marker entry', () => {
    const results = Array.from({ length: 500 }, (_, i) => ({ file: `f${i}.py`, line: i }));
    const o = JSON.parse(renderObservation(ok({ results }, false), 2000));
    expect(o.truncated).toBe(true);
    expect(o.data.results[0]).toEqual({ file: 'f0.py', line: 0 });
    expect(o.data.results.at(-1)).toEqual({ file: 'f499.py', line: 499 });
    const marker = o.data.results.find((x: unknown) => typeof x === 'string');
    const kept = o.data.results.length - 1;
    expect(marker).toBe(`[... ${500 - kept} of 500 entries cut ...]`);
  });

  it('never suggests an action: the marker only says how much was cut', () => {
    const cut = cutText('y'.repeat(10_000), 100);
    expect(cut).toMatch(/^y{50}\[\.\.\. 9900 of 10000 characters cut \.\.\.\]\ny{50}$/);
    expect(cut).not.toMatch(/run|call|read|search/i);
  });

  it('keeps the tool truncated flag even when nothing more is cut', () => {
    expect(JSON.parse(renderObservation(ok({ a: 'x'.repeat(50) }, true), 60)).truncated).toBe(true);
  });
});
