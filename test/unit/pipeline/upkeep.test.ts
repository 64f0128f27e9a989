import { mkdirSync, rmSync, utimesSync, existsSync } from 'node:fs';
import path from 'node:path';
import { hostUpkeep, RETENTION_TICKS } from '../../../src/pipeline/startup.js';
import { tempDir, testConfig } from '../../support/app.js';
import { until } from '../../support/queue-contract.js';

/**
 * Issue 37, item 7: retention ran at serve's start-up and in serve's upkeep, but a distributed serve has
 * no run directories and a worker applied it only when it started: a long-lived worker's run
 * directories and mirrors grew without bound. Serve alone and each worker now share one upkeep.
 */
describe("a run machine's upkeep", () => {
  let home: string;
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('applies retention every RETENTION_TICKS upkeeps, sparing runs still going on', async () => {
    home = tempDir('upkeep-');
    const config = testConfig(home, { AGENTICFIX_RUNS_KEEP: '1' });
    const t = Date.now() / 1000;
    const dirs = ['old', 'old-verify', 'going', 'new'];
    dirs.forEach((d, i) => {
      const p = path.join(config.runsDir, d);
      mkdirSync(p, { recursive: true });
      utimesSync(p, t - 100 + i, t - 100 + i);
    });
    const lines: string[] = [];
    const log = {
      info: (_: object, msg: string) => lines.push(msg),
      warn: (_: object, msg: string) => lines.push(msg),
      error: (_: object, msg: string) => lines.push(msg),
    };
    const o = {
      config,
      docker: false,
      isFinished: async () => true,
      isRunning: async (id: string) => id === 'going',
      log,
    };
    hostUpkeep(o, RETENTION_TICKS - 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(lines).toEqual([]);
    hostUpkeep(o, RETENTION_TICKS);
    await until('retention applied', () => lines.length > 0);
    expect(lines).toEqual(['retention applied']);
    expect(dirs.filter((d) => existsSync(path.join(config.runsDir, d)))).toEqual(['going', 'new']);
  });
});
