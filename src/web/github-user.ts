import { exchangeWebFlowCode, getWebFlowAuthorizationUrl } from '@octokit/oauth-methods';
import { Octokit } from '@octokit/rest';
import { z } from 'zod';

/**
 * GitHub as the signed-in person sees it: the app's OAuth web flow (user-to-server tokens, through
 * @octokit/oauth-methods) and, with
 * the person's token, who they are and what they may do in a repository. GitHub decides; nothing here
 * guesses.
 */

const USER = z.object({ login: z.string().min(1) });
const REPO = z.object({
  permissions: z
    .object({ admin: z.boolean(), maintain: z.boolean().optional(), push: z.boolean(), pull: z.boolean() })
    .optional(),
});

export type Access = 'none' | 'read' | 'write';

const TIMEOUT_MS = 10_000;

export interface GitHubSite {
  /** The REST API's base (https://api.github.com, https://HOST/api/v3, the emulator). */
  api: string;
  /** Where people sign in (https://github.com, https://HOST, the emulator). */
  web: string;
}

/** The site of an API base URL: GitHub.com's web is github.com, GitHub Enterprise's the host itself. */
export function siteOf(apiBase: string | undefined): GitHubSite {
  const api = (apiBase ?? 'https://api.github.com').replace(/\/+$/, '');
  if (api === 'https://api.github.com') return { api, web: 'https://github.com' };
  return { api, web: api.replace(/\/api\/v3$/, '') };
}

export class GitHubUsers {
  /** Requests at the API base: the OAuth methods derive the sign-in site from it (GitHub Enterprise too). */
  private readonly request: Octokit['request'];

  constructor(
    private readonly site: GitHubSite,
    private readonly client: { id: string; secret: string },
  ) {
    this.request = new Octokit({ baseUrl: site.api }).request;
  }

  /** Where the browser goes to sign in; GitHub sends it back to `redirectUri` with a code and `state`. */
  authorizeUrl(redirectUri: string, state: string, login?: string): string {
    return getWebFlowAuthorizationUrl({
      clientType: 'github-app',
      clientId: this.client.id,
      redirectUrl: redirectUri,
      state,
      ...(login && { login }),
      request: this.request,
    }).url;
  }

  /** The code from the redirect traded for the person's token and login. */
  async signIn(code: string, redirectUri: string): Promise<{ token: string; login: string }> {
    const { authentication } = await exchangeWebFlowCode({
      clientType: 'github-app',
      clientId: this.client.id,
      clientSecret: this.client.secret,
      code,
      redirectUrl: redirectUri,
      request: this.request.defaults({ request: { signal: AbortSignal.timeout(TIMEOUT_MS) } }),
    }).catch((err: unknown) => {
      throw new Error(`GitHub refused the sign-in: ${(err as Error).message}`);
    });
    const user = USER.parse(await this.get(authentication.token, '/user'));
    return { token: authentication.token, login: user.login };
  }

  /** What the person may do in `owner/repo`: GitHub's answer to GET /repos/{owner}/{repo} with their token. */
  async access(token: string, owner: string, repo: string): Promise<Access> {
    const body = await this.get(token, `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}`);
    if (body === null) return 'none';
    const p = REPO.parse(body).permissions;
    if (!p) return 'read'; // a public repository seen by a token without a grant on it
    if (p.admin || p.maintain || p.push) return 'write';
    return p.pull ? 'read' : 'none';
  }

  /** The JSON body, or null for a 404 or 403 (GitHub hides what the person may not see). */
  private async get(token: string, path: string): Promise<unknown> {
    const res = await fetch(`${this.site.api}${path}`, {
      headers: {
        accept: 'application/vnd.github+json',
        authorization: `Bearer ${token}`,
        'x-github-api-version': '2022-11-28',
      },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    if (res.status === 404 || res.status === 403) return null;
    if (res.status === 401) throw new SignedOut();
    if (!res.ok) throw new Error(`GitHub answered ${res.status} to GET ${path}`);
    return res.json();
  }
}

/** The person's token is no longer valid (revoked, expired): they must sign in again. */
export class SignedOut extends Error {
  constructor() {
    super('the GitHub sign-in is no longer valid');
  }
}
