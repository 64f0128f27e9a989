/**
 * Registering a GitHub App from a manifest, as GitHub does it: the app's setup page posts a form with the
 * manifest to `/settings/apps/new` (or an organisation's); GitHub creates the app and redirects to the
 * manifest's `redirect_url` with a one-time code, which the app converts with
 * `POST /app-manifests/{code}/conversions` into its id, private key and webhook secret.
 * (docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest)
 *
 * The emulator holds one app: a conversion gives it the new key, webhook secret and webhook URL, so
 * the credentials written by the setup flow are the ones it then checks.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Reply } from './github-routes.js';
import type { Json } from './github-shapes.js';
import { timestamp } from './github-state.js';

const Manifest = z.object({
  name: z.string().min(1).optional(),
  description: z.string().optional(),
  url: z.string().min(1),
  hook_attributes: z.object({ url: z.string().url(), active: z.boolean().optional() }).optional(),
  redirect_url: z.string().url(),
  public: z.boolean().optional(),
  default_events: z.array(z.string()).optional(),
  default_permissions: z.record(z.string(), z.string()).optional(),
});
type Manifest = z.infer<typeof Manifest>;

/** The form GitHub's "new app" page takes: `manifest` (JSON) and an optional `state` in the query. */
const NEW_APP_PAGE = /^\/(?:organizations\/[^/]+\/)?settings\/apps\/new\/?$/;
const CONVERSION = /^\/app-manifests\/([^/]+)\/conversions\/?$/;

export interface CreatedApp {
  publicKeyPem: string;
  webhookSecret: string;
  hookUrl: string | null;
}

export class ManifestFlow {
  private readonly codes = new Map<string, Manifest>();

  constructor(
    private readonly o: {
      app: { id: number; slug: string };
      owner: () => Json;
      baseUrl: () => string;
      created: (app: CreatedApp) => void;
    },
  ) {}

  /** Whether the path is GitHub's web page for a new app (not the REST API). */
  isPage(pathname: string): boolean {
    return NEW_APP_PAGE.test(pathname);
  }

  /** That page: the setup form posts the manifest to it. */
  page(method: string, query: URLSearchParams, form: string): Reply {
    if (method !== 'POST') return { status: 405, body: Buffer.from('Method Not Allowed\n') };
    let manifest: Manifest;
    try {
      manifest = Manifest.parse(JSON.parse(new URLSearchParams(form).get('manifest') ?? ''));
    } catch (err) {
      return { status: 422, body: Buffer.from(`Invalid GitHub App manifest: ${String(err)}\n`) };
    }
    // GitHub asks the person to confirm the name first; here the app is created at once.
    const code = randomBytes(10).toString('hex');
    this.codes.set(code, manifest);
    const back = new URL(manifest.redirect_url);
    back.searchParams.set('code', code);
    const state = query.get('state');
    if (state) back.searchParams.set('state', state);
    return {
      status: 302,
      headers: { location: back.href },
      body: Buffer.from(`Found. Redirecting to ${back.href}\n`),
    };
  }

  /** `POST /app-manifests/{code}/conversions`: no authentication, the code once; null for other requests. */
  convert(method: string, pathname: string): Reply | null {
    const m = CONVERSION.exec(pathname);
    if (!m || method !== 'POST') return null;
    const code = decodeURIComponent(m[1]!);
    const manifest = this.codes.get(code);
    if (!manifest)
      return {
        status: 404,
        body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' },
      };
    this.codes.delete(code);
    const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const webhookSecret = randomBytes(20).toString('hex');
    this.o.created({
      publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      webhookSecret,
      hookUrl: manifest.hook_attributes?.url ?? null,
    });
    const { id, slug } = this.o.app;
    const now = timestamp();
    return {
      status: 201,
      body: {
        id,
        slug,
        node_id: `A_${id}`,
        client_id: `Iv1.${randomBytes(8).toString('hex')}`,
        owner: this.o.owner(),
        name: manifest.name ?? slug,
        description: manifest.description ?? null,
        external_url: manifest.url,
        html_url: `${this.o.baseUrl()}/apps/${slug}`,
        created_at: now,
        updated_at: now,
        permissions: manifest.default_permissions ?? {},
        events: manifest.default_events ?? [],
        client_secret: randomBytes(20).toString('hex'),
        webhook_secret: webhookSecret,
        pem: keys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
      },
    };
  }
}
