import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Octokit } from '@octokit/rest';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { limitedServer, type ConnectionLimits } from '../config/listener.js';
import { html } from '../web/html.js';
import { forwardedProto } from '../web/routes.js';
import { sameToken } from '../web/sessions.js';

/**
 * GitHub's manifest flow (docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest),
 * as Probot's setup page does it, for its operator only: every page and GitHub's redirect back need a
 * one-time token that is printed on the console (the page carries it to GitHub as the flow's `state`,
 * GitHub returns it with the code); only GET is served (no "import an existing app" POST); a request
 * whose Origin is another site is refused.
 */

export interface SetupOptions {
  host: string;
  port: number;
  /** app.yml's directory (and package.json's): the manifest. */
  packageDir: string;
  /** GHE_HOST, GHE_PROTOCOL, GH_ORG, WEBHOOK_PROXY_URL as set. */
  env: Record<string, string>;
  /** AGENTICFIX_TRUST_PROXY: a TLS proxy's X-Forwarded-Proto makes the addresses https. */
  trustProxy: boolean;
  /** Called with the app's credentials once GitHub created it; what it throws is shown to the operator. */
  save: (vars: Record<string, string>) => void;
  /** AGENTICFIX_HTTP_*: the page may listen on a reachable address (HOST) for as long as setup waits. */
  limits: ConnectionLimits;
}

export interface SetupServer {
  /** The setup page's address with its token: for the operator's eyes only. */
  url: string;
  /** Resolves once the credentials were saved. */
  done: Promise<void>;
  close(): Promise<void>;
}

/** What GitHub answers to `POST /app-manifests/{code}/conversions`, in the part kept. */
const Conversion = z.object({
  id: z.number().int().positive(),
  client_id: z.string().min(1),
  client_secret: z.string().min(1),
  webhook_secret: z.string().min(1),
  pem: z.string().min(1),
  html_url: z.url(),
});

export async function startSetupServer(o: SetupOptions): Promise<SetupServer> {
  const token = randomBytes(24).toString('base64url');
  const github = `${o.env.GHE_PROTOCOL ?? 'https'}://${o.env.GHE_HOST ?? 'github.com'}`;
  const createAppUrl = `${github}${o.env.GH_ORG ? `/organizations/${encodeURIComponent(o.env.GH_ORG)}` : ''}/settings/apps/new`;
  let saved!: () => void;
  const done = new Promise<void>((resolve) => (saved = resolve));
  let finished = false;

  const send = (res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8') =>
    void res
      .writeHead(status, {
        'content-type': type,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
        'x-frame-options': 'DENY',
      })
      .end(body);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://setup.invalid');
    const scheme = o.trustProxy && forwardedProto(req) === 'https' ? 'https' : 'http';
    const site = `${scheme}://${req.headers.host ?? `${o.host}:${o.port}`}`;
    const origin = req.headers.origin;
    // A form or fetch from another page the operator has open (text/plain POSTs need no preflight).
    if (origin !== undefined && origin !== site) return send(res, 403, 'cross-site request refused\n');
    if (req.method !== 'GET') return send(res, 405, 'the setup pages take GET only\n');
    const given = url.searchParams.get(url.pathname === '/probot/setup' ? 'state' : 'token') ?? undefined;
    if (finished || !sameToken(given, token))
      return send(
        res,
        403,
        finished
          ? 'the app is registered; this setup is over\n'
          : 'open the setup address printed on the console (it carries a one-time token)\n',
      );
    if (url.pathname === '/probot') return send(res, 200, page(manifest(site)), 'text/html; charset=utf-8');
    if (url.pathname === '/probot/setup') return convert(res, url.searchParams.get('code'));
    return send(res, 404, 'not found\n');
  }

  function manifest(site: string): string {
    const yml = path.join(o.packageDir, 'app.yml');
    const app = existsSync(yml) ? (parseYaml(readFileSync(yml, 'utf8')) as Record<string, unknown>) : {};
    const pkg = JSON.parse(readFileSync(path.join(o.packageDir, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    // Probot's manifest: app.yml over these defaults.
    return JSON.stringify({
      description: pkg.description,
      hook_attributes: { url: o.env.WEBHOOK_PROXY_URL ?? `${site}/` },
      name: pkg.name,
      public: true,
      redirect_url: `${site}/probot/setup`,
      url: pkg.homepage ?? pkg.repository,
      version: 'v1',
      ...app,
    });
  }

  function page(manifestJson: string): string {
    const action = `${createAppUrl}?state=${encodeURIComponent(token)}`;
    return String(
      html`<!DOCTYPE html>
        <html lang="en">
          <head>
            <meta charset="utf-8" />
            <title>Register the GitHub App</title>
          </head>
          <body>
            <h1>Register the GitHub App</h1>
            <p>GitHub creates the app from app.yml; its credentials are written to .env on this machine.</p>
            <form action="${action}" method="post">
              <input type="hidden" name="manifest" id="manifest" value="${manifestJson}" />
              <button type="submit">Register GitHub App on ${github}</button>
            </form>
          </body>
        </html> `,
    );
  }

  async function convert(res: ServerResponse, code: string | null): Promise<void> {
    if (!code || !/^[\w-]{1,200}$/.test(code)) return send(res, 400, 'code missing or invalid\n');
    const octokit = new Octokit({ baseUrl: o.env.GHE_HOST ? `${github}/api/v3` : undefined });
    const app = Conversion.parse((await octokit.rest.apps.createFromManifest({ code })).data);
    o.save({
      APP_ID: String(app.id),
      PRIVATE_KEY: app.pem,
      WEBHOOK_SECRET: app.webhook_secret,
      GITHUB_CLIENT_ID: app.client_id,
      GITHUB_CLIENT_SECRET: app.client_secret,
    });
    finished = true;
    res.writeHead(302, { location: `${app.html_url}/installations/new` }).end();
    saved();
  }

  const server = limitedServer(o.limits, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, `setup failed: ${(err as Error).message}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const shown = o.host === '0.0.0.0' || o.host === '::' ? 'localhost' : o.host;
  return {
    url: `http://${shown}:${addr.port}/probot?token=${token}`,
    done,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
