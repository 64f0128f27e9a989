import { rmSync } from 'node:fs';
import {
  attemptCount,
  changedLines,
  choose,
  runOfLabel,
  type Attempt,
} from '../../../src/pipeline/attempts.js';
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
});
