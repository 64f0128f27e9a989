import { execFile } from 'node:child_process';
import {
  createHmac,
  generateKeyPairSync,
  randomBytes,
  sign,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Octokit } from '@octokit/rest';
import { startGitHubEmulator, type CreatedRepo, type GitHubEmulator } from '../../../src/emulator/github.js';

const run = promisify(execFile);
const SECRET = 'webhook-secret';
const APP_ID = 4242;

const GIT_ENV = {
  ...process.env,
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Tester',
  GIT_AUTHOR_EMAIL: 'tester@example.invalid',
  GIT_COMMITTER_NAME: 'Tester',
  GIT_COMMITTER_EMAIL: 'tester@example.invalid',
};
const gitIn = (cwd: string, ...args: string[]) => run('git', args, { cwd, env: GIT_ENV });
const tokenHeader = (token: string) =>
  `http.extraHeader=Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;

function appJwt(key: KeyObject, iss: number | string = APP_ID): string {
  const now = Math.floor(Date.now() / 1000);
  const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const unsigned = `${enc({ alg: 'RS256', typ: 'JWT' })}.${enc({ iat: now - 30, exp: now + 540, iss })}`;
  return `${unsigned}.${sign('RSA-SHA256', Buffer.from(unsigned), key).toString('base64url')}`;
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const client = (auth?: string) => new Octokit({ auth, baseUrl: emu.url, log: quiet });

const errorStatus = async (p: Promise<unknown>): Promise<number> => {
  try {
    await p;
    return 200;
  } catch (err) {
    return (err as { status: number }).status;
  }
};

let emu: GitHubEmulator;
const scratch: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
};
afterAll(() => scratch.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('GitHub emulator', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  let octokit: Octokit;
  let token: string;
  let created: CreatedRepo;

  beforeEach(async () => {
    emu = await startGitHubEmulator({
      webhookSecret: SECRET,
      appId: APP_ID,
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    created = emu.createRepo('octo', 'demo', {
      files: {
        'README.md': '# demo\n',
        'src/calc.py': 'def add(a, b):\n    return a - b\n',
        '.github/agenticfix.yml': 'test_command: pytest\n',
      },
    });
    token = emu.installationToken('octo');
    octokit = client(token);
  });
  afterEach(() => emu.close());

  it('exchanges an RS256 app JWT for an installation token and rejects a JWT from another key', async () => {
    const app = client(appJwt(privateKey));
    const { data: installation } = await app.apps.getRepoInstallation({ owner: 'octo', repo: 'demo' });
    expect(installation.account).toMatchObject({ login: 'octo' });
    expect((await app.apps.listInstallations()).data.map((i) => i.id)).toEqual([installation.id]);
    const { data: issued, status } = await app.apps.createInstallationAccessToken({
      installation_id: installation.id,
    });
    expect(status).toBe(201);
    expect(issued.token).toMatch(/^ghs_/);
    expect(Date.parse(issued.expires_at)).toBeGreaterThan(Date.now());

    const asInstallation = client(issued.token);
    expect((await asInstallation.repos.get({ owner: 'octo', repo: 'demo' })).data.default_branch).toBe(
      'main',
    );

    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const forged = client(appJwt(stranger));
    expect(
      await errorStatus(forged.apps.createInstallationAccessToken({ installation_id: installation.id })),
    ).toBe(401);
    const wrongApp = client(appJwt(privateKey, 1));
    expect(await errorStatus(wrongApp.apps.listInstallations())).toBe(401);
    // An installation token is no app credential and vice versa.
    expect(await errorStatus(asInstallation.apps.listInstallations())).toBe(401);
    expect(await errorStatus(app.repos.get({ owner: 'octo', repo: 'demo' }))).toBe(401);
    const anonymous = client();
    expect(await errorStatus(anonymous.issues.get({ owner: 'octo', repo: 'demo', issue_number: 1 }))).toBe(
      401,
    );

    emu.revokeTokens();
    expect(await errorStatus(asInstallation.repos.get({ owner: 'octo', repo: 'demo' }))).toBe(401);
  });

  it('serves repository metadata, refs, commits, contents and collaborator permissions', async () => {
    const { data: repo } = await octokit.repos.get({ owner: 'octo', repo: 'demo' });
    expect(repo).toMatchObject({
      full_name: 'octo/demo',
      private: false,
      clone_url: `${emu.url}/git/octo/demo.git`,
    });
    const head = emu.branchHead('octo', 'demo', 'main');
    expect(
      (await octokit.repos.getBranch({ owner: 'octo', repo: 'demo', branch: 'main' })).data.commit.sha,
    ).toBe(head);
    expect(
      (await octokit.git.getRef({ owner: 'octo', repo: 'demo', ref: 'heads/main' })).data.object.sha,
    ).toBe(head);
    expect(
      (await octokit.repos.getCommit({ owner: 'octo', repo: 'demo', ref: 'main' })).data.commit.message,
    ).toMatch(/Initial commit/);

    const { data: file } = await octokit.repos.getContent({
      owner: 'octo',
      repo: 'demo',
      path: '.github/agenticfix.yml',
    });
    expect(Buffer.from((file as { content: string }).content, 'base64').toString()).toBe(
      'test_command: pytest\n',
    );
    const raw = await octokit.request('GET /repos/{owner}/{repo}/contents/{path}', {
      owner: 'octo',
      repo: 'demo',
      path: 'src/calc.py',
      mediaType: { format: 'raw' },
    });
    expect(raw.data).toContain('return a - b');
    expect(
      await errorStatus(octokit.repos.getContent({ owner: 'octo', repo: 'demo', path: 'missing.yml' })),
    ).toBe(404);
    expect(await errorStatus(octokit.repos.get({ owner: 'octo', repo: 'nope' }))).toBe(404);

    emu.setPermission('octo', 'demo', 'maint', 'maintain');
    emu.createIssue('octo', 'demo', { title: 'seen', user: 'reader' });
    const perm = (username: string) =>
      octokit.repos
        .getCollaboratorPermissionLevel({ owner: 'octo', repo: 'demo', username })
        .then((r) => r.data);
    expect(await perm('octo')).toMatchObject({ permission: 'admin', role_name: 'admin' });
    expect(await perm('maint')).toMatchObject({ permission: 'write', role_name: 'maintain' });
    expect(await perm('reader')).toMatchObject({ permission: 'read', role_name: 'read' });
    expect(await errorStatus(perm('never-seen'))).toBe(404);
  });

  it('runs issue, label, comment, reaction and pull request flows with GitHub shapes and numbering', async () => {
    const n = emu.createIssue('octo', 'demo', { title: 'add() subtracts', body: 'fix it', user: 'alice' });
    const { data: issue } = await octokit.issues.get({ owner: 'octo', repo: 'demo', issue_number: n });
    expect(issue).toMatchObject({
      number: 1,
      title: 'add() subtracts',
      user: { login: 'alice', type: 'User' },
    });
    expect(issue.pull_request).toBeUndefined();

    await octokit.issues.addLabels({
      owner: 'octo',
      repo: 'demo',
      issue_number: n,
      labels: ['agenticfix', 'bug'],
    });
    await octokit.issues.removeLabel({ owner: 'octo', repo: 'demo', issue_number: n, name: 'bug' });
    expect(
      (await octokit.issues.listLabelsOnIssue({ owner: 'octo', repo: 'demo', issue_number: n })).data,
    ).toEqual([expect.objectContaining({ name: 'agenticfix' })]);
    expect(
      await errorStatus(
        octokit.issues.removeLabel({ owner: 'octo', repo: 'demo', issue_number: n, name: 'bug' }),
      ),
    ).toBe(404);

    const { data: status } = await octokit.issues.createComment({
      owner: 'octo',
      repo: 'demo',
      issue_number: n,
      body: 'Working',
    });
    expect(status.user).toMatchObject({ login: emu.botLogin, type: 'Bot' });
    expect(status.html_url).toBe(`${emu.url}/octo/demo/issues/1#issuecomment-${status.id}`);
    await octokit.issues.updateComment({ owner: 'octo', repo: 'demo', comment_id: status.id, body: 'Done' });
    expect(
      (await octokit.issues.getComment({ owner: 'octo', repo: 'demo', comment_id: status.id })).data.body,
    ).toBe('Done');

    const reaction = await octokit.reactions.createForIssueComment({
      owner: 'octo',
      repo: 'demo',
      comment_id: status.id,
      content: 'eyes',
    });
    expect(reaction.status).toBe(201);
    const again = await octokit.reactions.createForIssueComment({
      owner: 'octo',
      repo: 'demo',
      comment_id: status.id,
      content: 'eyes',
    });
    expect(again.status).toBe(200);
    expect(emu.reactions).toEqual([expect.objectContaining({ commentId: status.id, content: 'eyes' })]);

    const tooLong = 'x'.repeat(65537);
    const rejected = octokit.issues.updateComment({
      owner: 'octo',
      repo: 'demo',
      comment_id: status.id,
      body: tooLong,
    });
    await expect(rejected).rejects.toMatchObject({
      status: 422,
      response: {
        data: {
          message: 'Validation Failed',
          errors: [
            {
              resource: 'IssueComment',
              code: 'custom',
              field: 'body',
              message: 'body is too long (maximum is 65536 characters)',
            },
          ],
        },
      },
    });
    expect(emu.comments(n).map((c) => c.body)).toEqual(['Done']);
    await octokit.issues.deleteComment({ owner: 'octo', repo: 'demo', comment_id: status.id });
    expect(emu.comments(n)).toEqual([]);

    const paged = Array.from({ length: 35 }, (_, i) => `c${i}`);
    for (const body of paged)
      await octokit.issues.createComment({ owner: 'octo', repo: 'demo', issue_number: n, body });
    const all = await octokit.paginate(octokit.issues.listComments, {
      owner: 'octo',
      repo: 'demo',
      issue_number: n,
      per_page: 10,
    });
    expect(all.map((c) => c.body)).toEqual(paged);
  });

  it('records requests and injects faults for matching requests only, once per response', async () => {
    const n = emu.createIssue('octo', 'demo', { title: 't', user: 'alice' });
    emu.failNext({ method: 'POST', path: /\/issues\/\d+\/comments$/ }, [
      { status: 502 },
      {
        status: 403,
        headers: { 'retry-after': '1' },
        body: {
          message:
            'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
        },
      },
    ]);
    const post = () =>
      octokit.issues.createComment({ owner: 'octo', repo: 'demo', issue_number: n, body: 'hi' });
    await expect(octokit.issues.get({ owner: 'octo', repo: 'demo', issue_number: n })).resolves.toBeDefined();
    await expect(post()).rejects.toMatchObject({ status: 502 });
    await expect(post()).rejects.toMatchObject({
      status: 403,
      response: {
        headers: { 'retry-after': '1' },
        data: { message: expect.stringMatching(/secondary rate limit/) },
      },
    });
    await expect(post()).resolves.toMatchObject({ status: 201 });
    expect(emu.comments(n)).toHaveLength(1);
    expect(emu.requests.filter((r) => r.method === 'POST').map((r) => [r.path, r.status, r.body])).toEqual([
      ['/repos/octo/demo/issues/1/comments', 502, { body: 'hi' }],
      ['/repos/octo/demo/issues/1/comments', 403, { body: 'hi' }],
      ['/repos/octo/demo/issues/1/comments', 201, { body: 'hi' }],
    ]);
  });

  it('clones anonymously, accepts an authenticated push, refuses an anonymous one, and opens a draft PR', async () => {
    const work = tempDir('emu-clone-');
    const { cloneUrl, headSha } = created;
    expect(cloneUrl).toBe(`${emu.url}/git/octo/demo.git`);
    expect(emu.branchHead('octo', 'demo', 'main')).toBe(headSha);
    await run('git', ['clone', '--quiet', cloneUrl, work], { env: GIT_ENV });
    expect((await gitIn(work, 'rev-parse', 'HEAD')).stdout.trim()).toBe(headSha);

    await gitIn(work, 'checkout', '-q', '-b', 'agenticfix/issue-1');
    writeFileSync(path.join(work, 'src/calc.py'), 'def add(a, b):\n    return a + b\n');
    writeFileSync(path.join(work, 'big.bin'), randomBytes(3 * 1024 * 1024)); // beyond http.postBuffer: a chunked POST
    await gitIn(work, 'commit', '-qam', 'Fix add');
    await gitIn(work, 'add', 'big.bin');
    await gitIn(work, 'commit', '-qm', 'Add blob');
    const fixSha = (await gitIn(work, 'rev-parse', 'HEAD')).stdout.trim();

    const refspec = 'HEAD:refs/heads/agenticfix/issue-1';
    await expect(gitIn(work, 'push', 'origin', refspec)).rejects.toMatchObject({
      stderr: expect.stringMatching(/could not read Username|Authentication failed/),
    });
    await expect(
      gitIn(work, '-c', tokenHeader('ghs_bogus'), 'push', 'origin', refspec),
    ).rejects.toBeDefined();
    expect(emu.branchHead('octo', 'demo', 'agenticfix/issue-1')).toBeNull();

    await gitIn(
      work,
      '-c',
      tokenHeader(token),
      'push',
      '--force-with-lease=agenticfix/issue-1:',
      'origin',
      refspec,
    );
    expect(emu.branchHead('octo', 'demo', 'agenticfix/issue-1')).toBe(fixSha);
    // Credentials in the URL work too: git answers the 401 challenge with them.
    const authedUrl = cloneUrl.replace('http://', `http://x-access-token:${token}@`);
    await gitIn(work, 'push', '--force', authedUrl, 'HEAD~1:refs/heads/agenticfix/issue-1');
    expect(emu.branchHead('octo', 'demo', 'agenticfix/issue-1')).not.toBe(fixSha);
    expect(emu.requests.some((r) => r.path.endsWith('/git-receive-pack') && r.status === 200)).toBe(true);

    emu.createIssue('octo', 'demo', { title: 'add() subtracts', user: 'alice' });
    const open = (head: string) =>
      octokit.pulls.create({
        owner: 'octo',
        repo: 'demo',
        title: 'Fix #1',
        body: 'Fixes #1',
        head,
        base: 'main',
        draft: true,
      });
    expect(await errorStatus(open('no-such-branch'))).toBe(422);
    const { data: pr } = await open('agenticfix/issue-1');
    expect(pr).toMatchObject({
      number: 2,
      draft: true,
      state: 'open',
      head: { ref: 'agenticfix/issue-1' },
      base: { ref: 'main' },
    });
    await expect(open('octo:agenticfix/issue-1')).rejects.toMatchObject({
      status: 422,
      response: {
        data: {
          errors: [
            expect.objectContaining({
              message: 'A pull request already exists for octo:agenticfix/issue-1.',
            }),
          ],
        },
      },
    });

    const listed = await octokit.pulls.list({
      owner: 'octo',
      repo: 'demo',
      state: 'open',
      head: 'octo:agenticfix/issue-1',
    });
    expect(listed.data.map((p) => p.number)).toEqual([2]);
    expect((await octokit.pulls.list({ owner: 'octo', repo: 'demo', head: 'octo:other' })).data).toEqual([]);
    const { data: files } = await octokit.pulls.listFiles({ owner: 'octo', repo: 'demo', pull_number: 2 });
    expect(files).toEqual([
      expect.objectContaining({
        filename: 'src/calc.py',
        status: 'modified',
        additions: 1,
        deletions: 1,
        patch: expect.stringContaining('+    return a + b'),
      }),
    ]);
    await octokit.pulls.update({ owner: 'octo', repo: 'demo', pull_number: 2, body: 'Updated' });
    expect((await octokit.pulls.get({ owner: 'octo', repo: 'demo', pull_number: 2 })).data.body).toBe(
      'Updated',
    );
    const { data: asIssue } = await octokit.issues.get({ owner: 'octo', repo: 'demo', issue_number: 2 });
    expect(asIssue.pull_request?.html_url).toBe(`${emu.url}/octo/demo/pull/2`);
    await octokit.issues.createComment({
      owner: 'octo',
      repo: 'demo',
      issue_number: 2,
      body: 'Verification passed',
    });
    expect(emu.comments(2).map((c) => c.body)).toEqual(['Verification passed']);
    expect(emu.pulls.map((p) => p.number)).toEqual([2]);
  });

  it('creates a repository from a directory without touching it, honouring its .gitignore', async () => {
    const src = tempDir('emu-src-');
    mkdirSync(path.join(src, 'pkg'));
    writeFileSync(path.join(src, 'pkg', 'mod.py'), 'X = 1\n');
    writeFileSync(path.join(src, '.gitignore'), '*.log\n');
    writeFileSync(path.join(src, 'debug.log'), 'noise\n');
    const repo = emu.createRepo('octo', 'fixture', { fromDir: src, defaultBranch: 'trunk' });
    expect(existsSync(path.join(src, '.git'))).toBe(false);
    expect(() => emu.createRepo('octo', 'fixture')).toThrow(/already exists/);

    const clone = tempDir('emu-fixture-');
    await run('git', ['clone', '--quiet', repo.cloneUrl, clone], { env: GIT_ENV });
    expect((await gitIn(clone, 'rev-parse', '--abbrev-ref', 'HEAD')).stdout.trim()).toBe('trunk');
    expect(readFileSync(path.join(clone, 'pkg', 'mod.py'), 'utf8')).toBe('X = 1\n');
    expect(existsSync(path.join(clone, 'debug.log'))).toBe(false);
    const { data } = await octokit.repos.getContent({ owner: 'octo', repo: 'fixture', path: 'pkg' });
    expect(data).toEqual([expect.objectContaining({ type: 'file', name: 'mod.py', path: 'pkg/mod.py' })]);
  });

  it('serves private repositories to the installation only, for fetches too', async () => {
    const repo = emu.createRepo('octo', 'secret', { files: { 'a.txt': 'a\n' }, private: true });
    const { data } = await octokit.repos.get({ owner: 'octo', repo: 'secret' });
    expect(data.private).toBe(true);
    const anon = tempDir('emu-private-');
    await expect(run('git', ['clone', '--quiet', repo.cloneUrl, anon], { env: GIT_ENV })).rejects.toThrow();
    const work = tempDir('emu-private-');
    await run('git', ['-c', tokenHeader(token), 'clone', '--quiet', repo.cloneUrl, work], { env: GIT_ENV });
    expect(readFileSync(path.join(work, 'a.txt'), 'utf8')).toBe('a\n');
  });

  describe('webhooks', () => {
    let hook: Server;
    const received: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];

    beforeEach(async () => {
      received.length = 0;
      // A receiver that verifies the signature the way Probot does, over the exact bytes.
      hook = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          received.push({ headers: req.headers, body });
          const expected = Buffer.from(`sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`);
          const given = Buffer.from(String(req.headers['x-hub-signature-256']));
          const valid = given.length === expected.length && timingSafeEqual(given, expected);
          res.writeHead(valid ? 200 : 401).end(valid ? 'ok' : 'bad signature');
        });
      });
      await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
      emu.setWebhookUrl(`http://127.0.0.1:${(hook.address() as AddressInfo).port}/api/github/webhooks`);
    });
    afterEach(() => new Promise<void>((resolve) => hook.close(() => resolve())));

    it('delivers signed issues.labeled and issue_comment.created payloads and redelivers under the same id', async () => {
      const n = emu.createIssue('octo', 'demo', { title: 'add() subtracts', body: 'details', user: 'alice' });
      const labeled = await emu.label('octo', 'demo', n, 'agenticfix', 'maint');
      expect(labeled).toMatchObject({ status: 200, body: 'ok' });
      const first = received[0];
      expect(first?.headers).toMatchObject({
        'x-github-event': 'issues',
        'x-github-delivery': labeled.id,
        'content-type': 'application/json',
      });
      const payload = JSON.parse(first?.body ?? '{}');
      expect(payload).toMatchObject({
        action: 'labeled',
        label: { name: 'agenticfix' },
        issue: {
          number: n,
          title: 'add() subtracts',
          body: 'details',
          labels: [{ name: 'agenticfix' }],
          user: { login: 'alice' },
        },
        repository: {
          name: 'demo',
          full_name: 'octo/demo',
          owner: { login: 'octo' },
          default_branch: 'main',
          clone_url: `${emu.url}/git/octo/demo.git`,
        },
        sender: { login: 'maint', type: 'User' },
        installation: { id: emu.installationId('octo') },
      });
      expect(emu.issues[0]?.labels).toEqual(['agenticfix']);

      const commented = await emu.comment('octo', 'demo', n, '/agenticfix retry', 'alice');
      const comment = JSON.parse(received[1]?.body ?? '{}');
      expect(received[1]?.headers['x-github-event']).toBe('issue_comment');
      expect(comment).toMatchObject({
        action: 'created',
        comment: { body: '/agenticfix retry', user: { login: 'alice', type: 'User' } },
      });
      expect(comment.issue.pull_request).toBeUndefined();
      expect(emu.comments(n)).toEqual([expect.objectContaining({ id: comment.comment.id, user: 'alice' })]);

      const again = await emu.redeliver(commented.id);
      expect(again).toMatchObject({ id: commented.id, status: 200 });
      expect(received[2]).toEqual(received[1]);

      const botComment = await emu.comment('octo', 'demo', n, 'status', 'ci[bot]', { isBot: true });
      expect(botComment.status).toBe(200);
      expect(JSON.parse(received[3]?.body ?? '{}').comment.user).toMatchObject({
        login: 'ci[bot]',
        type: 'Bot',
      });

      const forged = await emu.deliver('issues', payload, { signature: 'sha256=' + '0'.repeat(64) });
      expect(forged).toMatchObject({ status: 401, body: 'bad signature' });
      expect(emu.deliveries.map((d) => d.id)).toEqual([labeled.id, commented.id, botComment.id, forged.id]);
    });

    it('marks comments on pull requests with issue.pull_request', async () => {
      const work = tempDir('emu-pr-');
      await run('git', ['clone', '--quiet', `${emu.url}/git/octo/demo.git`, work], { env: GIT_ENV });
      writeFileSync(path.join(work, 'NEW.md'), 'new\n');
      await gitIn(work, 'add', 'NEW.md');
      await gitIn(work, 'commit', '-qm', 'new');
      await gitIn(work, '-c', tokenHeader(token), 'push', 'origin', 'HEAD:refs/heads/feature');
      const { data: pr } = await octokit.pulls.create({
        owner: 'octo',
        repo: 'demo',
        title: 'f',
        head: 'feature',
        base: 'main',
      });
      await emu.comment('octo', 'demo', pr.number, 'please rebase', 'alice');
      const payload = JSON.parse(received[0]?.body ?? '{}');
      expect(payload.issue).toMatchObject({
        number: pr.number,
        pull_request: { url: `${emu.url}/repos/octo/demo/pulls/${pr.number}` },
      });
    });
  });
});
