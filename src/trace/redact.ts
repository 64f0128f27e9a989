/** Redaction of known secrets and sensitive fields before anything reaches a trace or a comment. */

const SENSITIVE_KEY = /(api[_-]?key|token|secret|password|authorization|private[_-]?key|cookie)/i;
const TOKEN_PATTERNS = [
  /\bgh[pousr]_[A-Za-z0-9]{20,}\b/g, // GitHub tokens
  /\bgithub_pat_[A-Za-z0-9_]{20,}\b/g,
  /\bsk-[A-Za-z0-9_-]{16,}\b/g, // OpenAI-style keys
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
];
export const REDACTED = '[REDACTED]';

export class Redactor {
  private readonly secrets: string[];
  constructor(secrets: Iterable<string | undefined> = []) {
    // Short values would redact ordinary words; real keys and tokens are long.
    this.secrets = [...secrets].filter((s): s is string => typeof s === 'string' && s.length >= 8);
  }

  text(s: string): string {
    let out = s;
    for (const secret of this.secrets) out = out.split(secret).join(REDACTED);
    for (const re of TOKEN_PATTERNS) out = out.replace(re, REDACTED);
    return out;
  }

  value<T>(v: T): T {
    return this.walk(v) as T;
  }

  private walk(v: unknown): unknown {
    if (typeof v === 'string') return this.text(v);
    if (Array.isArray(v)) return v.map((x) => this.walk(x));
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        out[k] = SENSITIVE_KEY.test(k) && typeof x === 'string' ? REDACTED : this.walk(x);
      }
      return out;
    }
    return v;
  }
}

/**
 * Operator details (host paths, private endpoints) replaced by placeholders wherever text goes public.
 * A value is replaced only as a whole path or URL: `/srv/x` in `/srv/x/runs` or `/srv/x:` but not in `/srv/xy`.
 */
export class Scrubber {
  private readonly rules: { re: RegExp; placeholder: string }[];
  constructor(values: Iterable<[value: string | undefined | null, placeholder: string]>) {
    const seen = new Set<string>();
    this.rules = [...values]
      .map(([v, p]) => [v?.replace(/\/+$/, '') ?? '', p] as const)
      .filter(([v]) => v.length >= 4 && !seen.has(v) && seen.add(v))
      // Longest first, so a worktree directory wins over the home holding it.
      .sort((a, b) => b[0].length - a[0].length)
      .map(([v, placeholder]) => ({
        re: new RegExp(`(?<![\\w.-])${v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w.-])`, 'g'),
        placeholder,
      }));
  }

  text(s: string): string {
    return this.rules.reduce((out, r) => out.replace(r.re, r.placeholder), s);
  }
}
