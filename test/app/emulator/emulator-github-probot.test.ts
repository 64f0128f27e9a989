import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createNodeMiddleware, Probot } from 'probot';
import { startGitHubEmulator, type GitHubEmulator } from '../../../src/emulator/github.js';

/** The emulator speaks well enough for a real Probot 14 app: JWT auth, signed webhooks, config, comments. */
describe('GitHub emulator with a real Probot app', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  let emu: GitHubEmulator;
  let server: Server;

  beforeAll(async () => {
    emu = await startGitHubEmulator({
      webhookSecret: 'probot-secret',
      appId: 77,
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    emu.createRepo('octo', 'demo', {
      files: { '.github/agenticfix.yml': 'label: fixme\nmax_attempts: 2\n' },
    });
    const probot = new Probot({
      appId: 77,
      privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      secret: 'probot-secret',
      baseUrl: emu.url,
      logLevel: 'fatal',
    });
    const middleware = await createNodeMiddleware(
      (app) => {
        app.on('issues.labeled', async (context) => {
          const config = await context.config<{ label: string; max_attempts: number }>('agenticfix.yml');
          const { data: perm } = await context.octokit.rest.repos.getCollaboratorPermissionLevel(
            context.repo({ username: context.payload.sender.login }),
          );
          await context.octokit.rest.issues.createComment(
            context.issue({ body: `config=${JSON.stringify(config)} sender=${perm.role_name}` }),
          );
        });
        app.on('issue_comment.created', async (context) => {
          if (context.isBot) return;
          await context.octokit.rest.reactions.createForIssueComment(
            context.repo({ comment_id: context.payload.comment.id, content: 'eyes' as const }),
          );
        });
      },
      { probot },
    );
    server = createServer((req, res) => middleware(req, res, () => res.writeHead(404).end()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    emu.setWebhookUrl(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/github/webhooks`);
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await emu.close();
  });

  it('authenticates as the installation, reads config and permissions, comments and reacts', async () => {
    emu.setPermission('octo', 'demo', 'maint', 'maintain');
    const n = emu.createIssue('octo', 'demo', { title: 'bug', user: 'alice' });
    const labeled = await emu.label('octo', 'demo', n, 'fixme', 'maint');
    expect(labeled.status).toBe(200);
    expect(emu.comments(n).map((c) => [c.user, c.body])).toEqual([
      [emu.botLogin, 'config={"label":"fixme","max_attempts":2} sender=maintain'],
    ]);
    expect(emu.requests.map((r) => [r.method, r.path, r.status])).toEqual([
      ['POST', `/app/installations/${emu.installationId('octo')}/access_tokens`, 201],
      ['GET', '/repos/octo/demo/contents/.github/agenticfix.yml', 200],
      ['GET', '/repos/octo/demo/collaborators/maint/permission', 200],
      ['POST', `/repos/octo/demo/issues/${n}/comments`, 201],
    ]);

    const human = await emu.comment('octo', 'demo', n, '/agenticfix retry', 'alice');
    await emu.comment('octo', 'demo', n, 'bot noise', 'other[bot]', { isBot: true });
    expect(emu.reactions).toEqual([expect.objectContaining({ content: 'eyes', user: emu.botLogin })]);
    expect(emu.reactions[0]?.commentId).toBe(emu.comments(n)[1]?.id);

    const forged = await emu.deliver('issue_comment', JSON.parse(emu.deliveries[1]?.body ?? '{}'), {
      signature: 'sha256=deadbeef',
    });
    expect(forged.status).toBeGreaterThanOrEqual(400);
    expect((await emu.redeliver(human.id)).status).toBe(200);
  });
});
