import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Access } from './github-user.js';

/**
 * Signed-in people, in serve's memory (one serve per store): a restart signs everyone out. The cookie
 * holds only a random id; each session has its own CSRF token for forms, and remembers GitHub's
 * answer per repository for ACCESS_TTL_MS.
 */

const SESSION_TTL_MS = 8 * 3600_000;
const ACCESS_TTL_MS = 60_000;
const PENDING_TTL_MS = 10 * 60_000;
/**
 * Sign-ins under way kept at most (anyone may start one, without a session): past it the oldest is
 * forgotten, and its person signs in again. With `next` capped (safeNext) they hold a few MB at most.
 */
export const MAX_PENDING_SIGN_INS = 10_000;
export const COOKIE = 'agenticfix_session';
/** Holds a sign-in's OAuth `state` in the browser that started it, until GitHub sends it back. */
export const SIGN_IN_COOKIE = 'agenticfix_signin';

export interface Session {
  id: string;
  login: string;
  token: string;
  csrf: string;
  expires: number;
  access: Map<string, { at: number; access: Access }>;
}

const random = () => randomBytes(24).toString('base64url');

export class Sessions {
  private readonly sessions = new Map<string, Session>();
  /** Sign-ins under way: OAuth `state` → where to go afterwards. */
  private readonly pending = new Map<string, { next: string; at: number }>();

  start(next: string): string {
    this.sweep();
    // Maps keep insertion order: the first key is the oldest sign-in.
    while (this.pending.size >= MAX_PENDING_SIGN_INS) this.pending.delete(this.pending.keys().next().value!);
    const state = random();
    this.pending.set(state, { next, at: Date.now() });
    return state;
  }

  /** Where the sign-in with this `state` goes afterwards; null for an unknown or stale one (used once). */
  finish(state: string): string | null {
    const p = this.pending.get(state);
    this.pending.delete(state);
    return p && Date.now() - p.at < PENDING_TTL_MS ? p.next : null;
  }

  create(login: string, token: string): Session {
    const s: Session = {
      id: random(),
      login,
      token,
      csrf: random(),
      expires: Date.now() + SESSION_TTL_MS,
      access: new Map(),
    };
    this.sessions.set(s.id, s);
    return s;
  }

  of(req: IncomingMessage): Session | null {
    const id = cookie(req, COOKIE);
    const s = id ? this.sessions.get(id) : undefined;
    if (!s) return null;
    if (s.expires < Date.now()) return (void this.sessions.delete(s.id), null);
    return s;
  }

  end(s: Session): void {
    this.sessions.delete(s.id);
  }

  /** GitHub's answer for the repository, asked again after ACCESS_TTL_MS. */
  async access(s: Session, repo: string, ask: () => Promise<Access>): Promise<Access> {
    const key = repo.toLowerCase();
    const known = s.access.get(key);
    if (known && Date.now() - known.at < ACCESS_TTL_MS) return known.access;
    const access = await ask();
    s.access.set(key, { at: Date.now(), access });
    return access;
  }

  /** Drops what expired. Both maps are in the order of their fixed lifetimes: the walk stops at the first alive. */
  private sweep(): void {
    const now = Date.now();
    for (const [k, p] of this.pending) {
      if (now - p.at < PENDING_TTL_MS) break;
      this.pending.delete(k);
    }
    for (const [k, s] of this.sessions) {
      if (s.expires >= now) break;
      this.sessions.delete(k);
    }
  }
}

export function sameToken(given: string | undefined, expected: string): boolean {
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
