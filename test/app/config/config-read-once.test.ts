import { CALC_CONFIG, CALC_FIX, fakeDeps } from '../../support/app.js';
import { calcRunEnded, startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * Issue 40: `.github/agenticfix.yml` was fetched twice for one label, by intake (which label starts a
 * run) and again by prepare (the run's settings), both at the commit the run is pinned to. Now one GET
 * a run; a later label at a new commit reads the file that commit has.
 */
describe('the repository config is read once for a labelled run', () => {
  const O = 'acme';
  let world: AppWorld;
  beforeAll(async () => {
    world = await startAppWorld({ deps: fakeDeps({ edits: () => CALC_FIX }) });
  });
  afterAll(() => world?.close());

  const configGets = (repo: string) =>
    world.emu.requests.filter(
      (q) => q.method === 'GET' && q.path === `/repos/${O}/${repo}/contents/.github/agenticfix.yml`,
    ).length;

  it('one GET of the config from the label to the pull request; a new commit is read again', async () => {
    const { emu, app } = world;
    const run = await calcRunEnded(app, emu, O, 'once');
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    expect(configGets('once')).toBe(1); // was 2
    // The default branch moves to a config that renames the label: the next label reads that commit's.
    emu.pushFiles(
      O,
      'once',
      'main',
      { '.github/agenticfix.yml': `${CALC_CONFIG}label: fix-it\n` },
      {
        message: 'rename the label',
        author: 'maint',
      },
    );
    const n = emu.createIssue(O, 'once', { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, 'once', n, 'agenticfix', 'maint');
    await app.idle();
    expect(await app.store.forIssue(O, 'once', n)).toHaveLength(0); // no longer the trigger label
    expect(configGets('once')).toBe(2);
    // The renamed label at that same commit starts a run on what was read: no further GET.
    await emu.label(O, 'once', n, 'fix-it', 'maint');
    await app.idle();
    expect(await app.store.forIssue(O, 'once', n)).toMatchObject([{ state: 'done' }]);
    expect(configGets('once')).toBe(2);
  });
});
