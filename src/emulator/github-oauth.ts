/**
 * The app's OAuth web flow (user-to-server tokens) as GitHub documents it: GET /login/oauth/authorize
 * redirects back with a code (the emulator has no sign-in page: the `login` parameter, GitHub's hint
 * of which account to use, is the signed-in user, else the repositories' first owner), POST
 * /login/oauth/access_token trades the code for a `ghu_` token, and with that token GET /user and
 * GET /repos/{owner}/{repo} (with the user's `permissions`; a private repository the user cannot
 * read is a 404) answer as that user.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Credentials } from './github-auth.js';
import type { Reply } from './github-routes.js';
import type { Shapes } from './github-shapes.js';
import type { EmulatorState, Permission } from './github-state.js';

const CODE_LIFETIME_MS = 10 * 60 * 1000;
const TOKEN_REQUEST = z.object({
  client_id: z.string(),
  client_secret: z.string(),
  code: z.string(),
  redirect_uri: z.string().optional(),
});

export interface OAuthClient {
  clientId: string;
  clientSecret: string;
}

export class OAuthFlow {
  readonly client: OAuthClient = {
    clientId: `Iv1.${randomBytes(8).toString('hex')}`,
    clientSecret: randomBytes(20).toString('hex'),
  };
  private readonly codes = new Map<string, { login: string; redirectUri: string | null; at: number }>();
  private readonly tokens = new Map<string, string>();

  constructor(
    private readonly state: EmulatorState,
    private readonly shapes: Shapes,
  ) {}

  /** The reply for an OAuth or user-token request, or null when it is none (the REST router answers). */
  handle(r: {
    method: string;
    pathname: string;
    query: URLSearchParams;
    body: unknown;
    creds: Credentials;
  }): Reply | null {
    if (r.method === 'GET' && r.pathname === '/login/oauth/authorize') return this.authorize(r.query);
    if (r.method === 'POST' && r.pathname === '/login/oauth/access_token') return this.exchange(r.body);
    const login =
      r.creds.kind === 'bearer' || r.creds.kind === 'token' ? this.tokens.get(r.creds.value) : undefined;
    if (login === undefined) return null;
    if (r.method === 'GET' && r.pathname === '/user')
      return { status: 200, body: this.shapes.authenticatedUser(login) };
    const repoPath = /^\/repos\/([^/]+)\/([^/]+)$/.exec(r.pathname);
    if (r.method === 'GET' && repoPath)
      return this.repo(login, decodeURIComponent(repoPath[1]!), decodeURIComponent(repoPath[2]!));
    // Anything else a user token may not do here.
    return { status: 403, body: { message: 'Resource not accessible by integration' } };
  }

  private authorize(query: URLSearchParams): Reply {
    if (query.get('client_id') !== this.client.clientId)
      return { status: 404, body: { message: 'Not Found' } };
    const redirect = query.get('redirect_uri');
    if (!redirect) return { status: 400, body: { message: 'redirect_uri is required here' } };
    const login = query.get('login') || [...this.state.repos.values()][0]?.owner;
    if (!login) return { status: 400, body: { message: 'nobody to sign in' } };
    this.state.user(login);
    const code = randomBytes(10).toString('hex');
    this.codes.set(code, { login, redirectUri: redirect, at: Date.now() });
    const to = new URL(redirect);
    to.searchParams.set('code', code);
    const state = query.get('state');
    if (state !== null) to.searchParams.set('state', state);
    return { status: 302, headers: { location: to.toString() } };
  }

  private exchange(body: unknown): Reply {
    const req = TOKEN_REQUEST.safeParse(body);
    // GitHub answers these errors with 200 and an `error` field.
    const error = (e: string, description: string): Reply => ({
      status: 200,
      body: { error: e, error_description: description },
    });
    if (!req.success) return error('bad_verification_code', 'The code passed is incorrect or expired.');
    if (req.data.client_id !== this.client.clientId || req.data.client_secret !== this.client.clientSecret)
      return error(
        'incorrect_client_credentials',
        'The client_id and/or client_secret passed are incorrect.',
      );
    const grant = this.codes.get(req.data.code);
    this.codes.delete(req.data.code);
    if (!grant || Date.now() - grant.at > CODE_LIFETIME_MS)
      return error('bad_verification_code', 'The code passed is incorrect or expired.');
    if (req.data.redirect_uri !== undefined && req.data.redirect_uri !== grant.redirectUri)
      return error(
        'redirect_uri_mismatch',
        'The redirect_uri MUST match the registered callback URL for this application.',
      );
    const token = `ghu_${randomBytes(18).toString('base64url')}`;
    this.tokens.set(token, grant.login);
    return { status: 200, body: { access_token: token, token_type: 'bearer', scope: '' } };
  }

  private repo(login: string, owner: string, name: string): Reply {
    const repo = this.state.repo(owner, name);
    const explicit = repo?.permissions.get(login);
    const permission: Permission = explicit ?? (repo && !repo.private ? 'read' : 'none');
    if (!repo || permission === 'none') return { status: 404, body: { message: 'Not Found' } };
    const at = (levels: Permission[]) => levels.includes(permission);
    return {
      status: 200,
      body: {
        ...(this.shapes.repo(repo) as Record<string, unknown>),
        permissions: {
          admin: at(['admin']),
          maintain: at(['admin', 'maintain']),
          push: at(['admin', 'maintain', 'write']),
          triage: at(['admin', 'maintain', 'write', 'triage']),
          pull: true,
        },
      },
    };
  }
}
