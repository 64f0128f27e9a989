import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../../src/config/config.js';
import { processOwner } from '../../../src/environment/lending.js';
import type { ScriptStep } from '../../../src/emulator/scripted-model.js';
import { removeOldWorktrees } from '../../../src/pipeline/startup.js';
import type { RepairOptions } from '../../../src/pipeline/types.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { capMiddle, ERROR_KEEP } from '../../../src/trace/cap.js';
import { RunTrace } from '../../../src/trace/trace.js';
import { git, GitError } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { measureTree } from '../../../src/workspace/tree.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { compose } from '../../../src/cli/compose.js';
import { call, repairFixture, type RepairFixture } from '../../support/repair.js';
import { describeIf } from '../../support/skip.js';

const FIXTURE = fileURLToPath(new URL('../../fixtures/agent-repo', import.meta.url));
const MiB = 1024 * 1024;

const engine = await needDocker();
let fixture: RepairFixture;
let repo: string;

beforeAll(async () => {
  fixture = await repairFixture('agenticfix-disk-', FIXTURE);
  repo = fixture.repo;
});
afterAll(() => fixture.cleanup());

const configFor = (home: string, env: Record<string, string> = {}): Config => fixture.config(home, env);

/** In this process's sandbox unless said. */
const repair = async (config: Config, script: ScriptStep[], more: Partial<RepairOptions>) =>
  (await fixture.repair(config, script, { sandbox: 'local', ...more })).result;

describeIf(engine)('a worktree that grows past its limit ends the run (real engine)', () => {
  it('tests writing 5 MB into the worktree under a 2 MB limit (the 500 MB attack, scaled) stop the run', async () => {
    const config = configFor('home-disk', { AGENTICFIX_MAX_WORKTREE_MB: '2' });
    const result = await repair(config, [call('run_tests'), call('finish', { summary: 'never reached' })], {
      sandbox: 'docker',
      dockerfile: `FROM ${BASE_IMAGE}\n`,
      // What the attacking test did, in the container: fill the worktree.
      testArgv: ['dd', 'if=/dev/zero', 'of=big.bin', 'bs=1M', 'count=5'],
    });
    expect(result.stop_reason).toBe('fatal');
    expect(result.error).toMatch(/worktree grew past 2 MB \(AGENTICFIX_MAX_WORKTREE_MB\)/);
    const recorded = JSON.parse(readFileSync(result.result_path, 'utf8')) as { error: string };
    expect(recorded.error).toBe(result.error);
    // A failed run's worktree is kept by default, but not one over the limit.
    expect(result.worktree_path).toBeNull();
    expect(existsSync(path.join(config.worktreeDir, result.run_id))).toBe(false);
  }, 300_000);
});

describe('disk bounds without Docker', () => {
  it('measureTree counts files and stops early past the limit', async () => {
    const dir = path.join(fixture.dir, 'usage');
    mkdirSync(path.join(dir, 'a', 'b'), { recursive: true });
    writeFileSync(path.join(dir, 'a', 'b', 'f'), Buffer.alloc(3 * MiB));
    writeFileSync(path.join(dir, 'g'), Buffer.alloc(MiB));
    const all = await measureTree(dir, { maxBytes: Infinity, maxEntries: Infinity });
    expect(all).toMatchObject({ entries: 4, over: null });
    expect(all.bytes).toBeGreaterThanOrEqual(4 * MiB);
    expect(all.bytes).toBeLessThan(4 * MiB + 64 * 1024);
    const over = await measureTree(dir, { maxBytes: MiB / 2, maxEntries: Infinity });
    expect(over.over).toBe('bytes');
    expect(over.bytes).toBeGreaterThan(MiB / 2);
    expect((await measureTree(dir, { maxBytes: Infinity, maxEntries: 3 })).over).toBe('entries');
  });

  it('AGENTICFIX_KEEP_FAILED_WORKTREES decides whether a failed run keeps its worktree', async () => {
    // The script ends without a finish: the run does not complete.
    const script = [call('list_files')];
    const kept = await repair(configFor('home-keep'), script, {});
    expect(kept.stop_reason).not.toBe('completed');
    expect(kept.worktree_path).not.toBeNull();
    expect(existsSync(kept.worktree_path!)).toBe(true);

    const config = configFor('home-drop', { AGENTICFIX_KEEP_FAILED_WORKTREES: 'false' });
    const dropped = await repair(config, script, {});
    expect(dropped.stop_reason).not.toBe('completed');
    expect(dropped.worktree_path).toBeNull();
    expect(existsSync(path.join(config.worktreeDir, dropped.run_id))).toBe(false);
  }, 60_000);

  it('worktrees older than AGENTICFIX_WORKTREE_MAX_AGE_H are removed, through git; lent ones are spared', async () => {
    const config = configFor('home-age', { AGENTICFIX_WORKTREE_MAX_AGE_H: '1' });
    const m = new GitWorkspaceManager(config);
    const base = await m.resolve(repo, 'main');
    const [old, fresh, lent] = await Promise.all(
      ['old', 'fresh', 'lent'].map((id) => m.create(repo, base, id)),
    );
    const stray = path.join(config.worktreeDir, 'stray');
    mkdirSync(stray);
    const twoHoursAgo = (Date.now() - 2 * 3600_000) / 1000;
    for (const p of [old!.path, lent!.path, stray]) utimesSync(p, twoHoursAgo, twoHoursAgo);
    // Lent to a container of a live process (this one) right now.
    writeFileSync(
      path.join(config.worktreeDir, '.lent.lent.json'),
      JSON.stringify({ worktree: lent!.path, uid: 0, gid: 0, owner: processOwner() }),
    );

    expect((await removeOldWorktrees(config, compose(config).workspaces)).sort()).toEqual(
      [old!.path, stray].sort(),
    );
    expect(existsSync(old!.path)).toBe(false);
    expect(existsSync(fresh!.path) && existsSync(lent!.path)).toBe(true);
    const listed = (await git(['worktree', 'list', '--porcelain'], { cwd: old!.mirror })).stdout;
    expect(listed).not.toContain(old!.path);
    expect(listed).toContain(fresh!.path);
  });

  it('error strings are capped, head and tail kept, wherever they are stored', async () => {
    // 100 MB of git-like output: a line per file.
    const huge = `fatal: start\n${'warning: in the working copy of a file\n'.repeat(2.5 * MiB)}end of the story`;
    const capped = capMiddle(huge);
    expect(capped.length).toBeLessThanOrEqual(2 * ERROR_KEEP + 60);
    expect(capped.startsWith('fatal: start')).toBe(true);
    expect(capped.endsWith('end of the story')).toBe(true);
    expect(capped).toMatch(/\n\[\.\.\. \d+ characters left out \.\.\.\]\n/);

    // The run store's error column.
    const store = new SqliteRunStore(':memory:');
    const run = await store.createRun({
      owner: 'o',
      repo: 'r',
      issue: 1,
      installation_id: 1,
      trigger: 'label',
      triggered_by: 'u',
      delivery_id: 'd1',
      base_commit: 'a'.repeat(40),
    });
    expect((await store.update(run.id, { state: 'failed', error: huge })).error).toBe(capped);
    await store.close();

    // result.json.
    const trace = new RunTrace('r-cap', path.join(fixture.dir, 'runs'));
    trace.writeResult({
      run_id: 'r-cap',
      stop_reason: 'fatal',
      success: false,
      started_at: '',
      finished_at: '',
      counts: {},
      artifacts: [],
      error: huge,
    });
    expect((JSON.parse(readFileSync(trace.resultPath, 'utf8')) as { error: string }).error).toBe(capped);

    // A failed git call with 100 MB of output (the failed export's error).
    const err = new GitError(['add', '-A'], 128, huge);
    expect(err.message.length).toBeLessThan(2 * ERROR_KEEP + 200);
    expect(err.message).toMatch(/end of the story$/);
  });
});
