import { Octokit } from '@octokit/rest';
import { startGitHubEmulator, type GitHubEmulator } from '../../../src/emulator/github.js';

/**
 * A long pull request's commits as GitHub documents them: listed 100 a page at most and 250 in all
 * (the oldest), while a comparison's status and counts cover the whole history and only its listed
 * commits are paged.
 */

const O = 'acme';
const R = 'long';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

describe('GitHub emulator: a pull request of 300 commits', () => {
  let emu: GitHubEmulator;
  let gh: Octokit;
  let pr: number;
  let all: string[];

  beforeAll(async () => {
    emu = await startGitHubEmulator({ webhookSecret: 's', webhookUrl: 'http://127.0.0.1:9' });
    emu.createRepo(O, R, { files: { 'README.md': 'long\n' } });
    emu.pushFiles(O, R, 'long', { 'a.txt': 'a\n' }, { message: 'Start', author: 'dev' });
    emu.pushCommits(O, R, 'long', 299, { file: 'NOTES.md', author: 'dev' });
    gh = new Octokit({ auth: emu.installationToken(O), baseUrl: emu.url, log: quiet });
    pr = (await gh.rest.pulls.create({ owner: O, repo: R, head: 'long', base: 'main', title: 'Long' })).data
      .number;
    all = emu.pullCommits(O, R, pr);
  });
  afterAll(async () => {
    await emu?.close();
  });

  it('lists 100 a page with Link headers, 250 at most, oldest first', async () => {
    expect(all).toHaveLength(300);
    const first = await gh.rest.pulls.listCommits({ owner: O, repo: R, pull_number: pr, per_page: 100 });
    expect(first.data.map((c) => c.sha)).toEqual(all.slice(0, 100));
    expect(first.headers.link).toContain('rel="next"');
    const last = await gh.rest.pulls.listCommits({
      owner: O,
      repo: R,
      pull_number: pr,
      per_page: 100,
      page: 3,
    });
    expect(last.data.map((c) => c.sha)).toEqual(all.slice(200, 250));
    expect(last.headers.link).not.toContain('rel="next"');
    expect(last.headers.link).toContain('rel="prev"');
  });

  it('compares whole histories: ahead, behind, identical, diverged; a commit it does not have is 404', async () => {
    const compare = async (basehead: string) =>
      (await gh.rest.repos.compareCommitsWithBasehead({ owner: O, repo: R, basehead, per_page: 1 })).data;
    const head = all[299]!;
    expect(await compare(`${all[0]!}...${head}`)).toMatchObject({
      status: 'ahead',
      ahead_by: 299,
      behind_by: 0,
    });
    expect(await compare(`${head}...${all[10]!}`)).toMatchObject({
      status: 'behind',
      ahead_by: 0,
      behind_by: 289,
    });
    expect(await compare(`${head}...${head}`)).toMatchObject({ status: 'identical', total_commits: 0 });
    const other = emu.pushFiles(O, R, 'main', { 'b.txt': 'b\n' }, { message: 'Other', author: 'dev' });
    expect(await compare(`${other}...${head}`)).toMatchObject({
      status: 'diverged',
      ahead_by: 300,
      behind_by: 1,
    });
    // Paged: one commit listed, the rest behind a Link; the files on the first page only.
    const paged = await gh.rest.repos.compareCommitsWithBasehead({
      owner: O,
      repo: R,
      basehead: `main...${head}`,
      per_page: 1,
      page: 2,
    });
    expect(paged.data.commits.map((c) => c.sha)).toEqual([all[1]]);
    expect(paged.data.files).toBeUndefined();
    expect(paged.headers.link).toContain('rel="next"');
    await expect(compare(`${'0'.repeat(40)}...${head}`)).rejects.toMatchObject({ status: 404 });
  });
});
