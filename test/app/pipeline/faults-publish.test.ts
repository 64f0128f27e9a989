import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import type { RunUpdate } from '../../../src/store/store.js';
import { calcFixScript, startEmulatedApp, startEmulator, testConfig, waitFor } from '../../support/app.js';
import { calcRepo, labelledIssue, SCRIPTED_DEPS } from '../../support/app-world.js';

/**
 * Publishing survives any process death (issue 37): a worker killed after its push and before its pull
 * request ended `interrupted` with verdict `verified`, its branch pushed, no PR ever, and the issue read
 * "Nothing was published".
 */

const O = 'acme';
const R = 'killed';

describe('a process killed between the push and the pull request', () => {
  it('stores the publishing record before the push; after a restart the run is published once, its commit reused', async () => {
    const emu = await startEmulator();
    const model = await startScriptedModelServer(calcFixScript('Changed `add` to add.'));
    const home = mkdtempSync(path.join(tmpdir(), 'faults-publish-'));
    const start = () =>
      startEmulatedApp(emu, {
        config: testConfig(home),
        deps: SCRIPTED_DEPS,
        model: { kind: 'url', baseUrl: model.url, name: 'scripted' },
        sandbox: 'local',
      });
    let app = await start();
    try {
      calcRepo(emu, O, R);
      emu.setWebhookUrl(app.url);
      // What the run writes, in order.
      const writes: (keyof RunUpdate)[][] = [];
      const update = app.store.update.bind(app.store);
      app.store.update = (id, fields) => {
        writes.push(Object.keys(fields) as (keyof RunUpdate)[]);
        return update(id, fields);
      };
      // The pull request is never opened by this process: it "dies" after its push.
      emu.failNext(
        { method: 'POST', path: new RegExp(`/repos/${O}/${R}/pulls$`) },
        Array(4).fill({ status: 502 }),
      );
      const n = await labelledIssue(app, emu, O, R);
      await app.idle();
      let [run] = await app.store.forIssue(O, R, n);
      const pushed = emu.branchHead(O, R, `agenticfix/issue-${n}`);
      expect(pushed).not.toBeNull();
      expect(run!.pushed_commit).toBe(pushed);
      const recorded = writes.findIndex((w) => w.includes('publish'));
      expect(recorded).toBeGreaterThanOrEqual(0);
      expect(recorded).toBeLessThan(writes.findIndex((w) => w.includes('pushed_commit')));

      // What a process killed right after the push leaves: the run `running`, its record as stored at the verdict.
      const record = JSON.parse(run!.publish!) as { attempts: number; next_at: string };
      await app.store.update(run!.id, {
        state: 'running',
        error: null,
        publish: JSON.stringify({ ...record, attempts: 0, next_at: new Date().toISOString() }),
      });
      await app.close();
      const asked = model.requests.length;

      app = await start();
      await waitFor(async () => (await app.store.get(run!.id))!.state === 'done', 30_000);
      await app.idle();
      [run] = await app.store.forIssue(O, R, n);
      expect(run).toMatchObject({ state: 'done', verdict: 'verified', publish: null, error: null });
      expect(emu.pulls).toHaveLength(1);
      expect(run!.pr_number).toBe(emu.pulls[0]!.number);
      expect(emu.branchHead(O, R, `agenticfix/issue-${n}`)).toBe(pushed); // the pushed commit reused
      expect(model.requests.length).toBe(asked); // the model is not run again
      const bodies = emu.comments(n).map((c) => c.body);
      expect(bodies.some((b) => b.includes('Nothing was published'))).toBe(false);
      expect(bodies.find((b) => b.startsWith('### AgenticFix:'))).toContain('✅ Done');
    } finally {
      await app.close();
      await model.close();
      await emu.close();
      rmSync(home, { recursive: true, force: true });
    }
  }, 120_000);
});
