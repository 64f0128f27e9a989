/**
 * GitHub App authentication as the emulator sees it: RS256 app JWTs (verified with the app's public
 * key when one is configured) exchanged for installation tokens, which every other call must carry.
 */
import { createPublicKey, randomBytes, verify, type KeyObject } from 'node:crypto';
import { z } from 'zod';

const JWT_HEADER = z.object({ alg: z.literal('RS256') });
const JWT_CLAIMS = z.object({ iat: z.number(), exp: z.number(), iss: z.union([z.number(), z.string()]) });

/** Clock skew GitHub tolerates for `iat`, and the longest lifetime it accepts. */
const SKEW_S = 60;
const MAX_LIFETIME_S = 10 * 60 + SKEW_S;
const TOKEN_LIFETIME_MS = 60 * 60 * 1000;

export type Credentials =
  | { kind: 'none' }
  | { kind: 'bearer'; value: string }
  | { kind: 'token'; value: string }
  | { kind: 'basic'; user: string; password: string };

/** Splits an Authorization header into its scheme's credentials. */
export function parseAuthorization(header: string | undefined): Credentials {
  const match = /^(\w+)\s+(.+)$/.exec(header?.trim() ?? '');
  if (!match) return { kind: 'none' };
  const [, scheme = '', value = ''] = match;
  switch (scheme.toLowerCase()) {
    case 'bearer':
      return { kind: 'bearer', value };
    case 'token':
      return { kind: 'token', value };
    case 'basic': {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      return colon < 0
        ? { kind: 'none' }
        : { kind: 'basic', user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
    }
    default:
      return { kind: 'none' };
  }
}

export interface InstallationToken {
  token: string;
  installationId: number;
  expiresAt: Date;
}

export class AppAuth {
  private publicKey: KeyObject | null;
  private readonly tokens = new Map<string, InstallationToken>();

  constructor(
    readonly appId: number,
    publicKeyPem?: string,
  ) {
    this.publicKey = publicKeyPem ? createPublicKey(publicKeyPem) : null;
  }

  /**
   * Whether a JWT is acceptable as this app's. Without a configured public key only its shape and
   * claims are checked, so tests may sign with any key.
   */
  verifyJwt(jwt: string, nowS = Math.floor(Date.now() / 1000)): boolean {
    const parts = jwt.split('.');
    if (parts.length !== 3) return false;
    const [header = '', claims = '', signature = ''] = parts;
    const h = JWT_HEADER.safeParse(decodeSegment(header));
    const c = JWT_CLAIMS.safeParse(decodeSegment(claims));
    if (!h.success || !c.success) return false;
    if (String(c.data.iss) !== String(this.appId)) return false;
    if (c.data.iat > nowS + SKEW_S || c.data.exp <= nowS || c.data.exp - c.data.iat > MAX_LIFETIME_S)
      return false;
    if (!this.publicKey) return true;
    return verify(
      'RSA-SHA256',
      Buffer.from(`${header}.${claims}`),
      this.publicKey,
      Buffer.from(signature, 'base64url'),
    );
  }

  /** The app's key from now on (a manifest conversion generated a new one). */
  setPublicKey(pem: string): void {
    this.publicKey = createPublicKey(pem);
  }

  issueToken(installationId: number): InstallationToken {
    const issued = {
      token: `ghs_${randomBytes(18).toString('base64url')}`,
      installationId,
      expiresAt: new Date(Date.now() + TOKEN_LIFETIME_MS),
    };
    this.tokens.set(issued.token, issued);
    return issued;
  }

  /** The live installation token named by the credentials, if any. */
  installationToken(creds: Credentials): InstallationToken | null {
    const value = creds.kind === 'basic' ? creds.password : creds.kind === 'none' ? '' : creds.value;
    const found = this.tokens.get(value);
    return found && found.expiresAt.getTime() > Date.now() ? found : null;
  }

  /** Expires every issued token, as if an hour had passed. */
  revokeAll(): void {
    this.tokens.clear();
  }
}

function decodeSegment(segment: string): unknown {
  try {
    return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
}
