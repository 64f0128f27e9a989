import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * Issue 24, item 5: docker-compose.yml ran Redis without a password and PostgreSQL with the default
 * `agenticfix`, while workers on other machines were told to connect to them. Whoever can write to
 * either can create runs for any installation the workers hold keys for, so no secret may have a
 * default: every one is `${VAR:?message}`, and compose refuses to start without it.
 */

const text = readFileSync('docker-compose.yml', 'utf8');
const compose = parse(text) as {
  services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
  'x-distributed': Record<string, string>;
};

describe('docker-compose.yml', () => {
  it('gives no secret a default: each is required from the environment', () => {
    const refs = [...text.matchAll(/\$\{(\w*(?:PASSWORD|SECRET|TOKEN|KEY)\w*)(:?[-?+]?)/g)];
    expect(refs.length).toBeGreaterThanOrEqual(4);
    for (const [ref, , op] of refs) expect([ref, op]).toEqual([ref, ':?']);
    expect(text).not.toMatch(/PASSWORD[:=]\s*['"]?agenticfix/);
  });

  it('makes Redis require the password the app and workers connect with', () => {
    const redis = compose.services.redis!.command!;
    const at = redis.indexOf('--requirepass');
    expect(at).toBeGreaterThan(0);
    expect(redis[at + 1]).toMatch(/^\$\{REDIS_PASSWORD:\?/);
    expect(compose['x-distributed'].AGENTICFIX_REDIS_URL).toMatch(
      /^redis:\/\/:\$\{REDIS_PASSWORD:\?[^}]*\}@redis:/,
    );
  });

  it('takes the PostgreSQL password from the environment, for the server and its clients alike', () => {
    expect(compose.services.postgres!.environment!.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?/);
    expect(compose['x-distributed'].AGENTICFIX_DATABASE_URL).toMatch(
      /^postgres:\/\/agenticfix:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres:/,
    );
  });

  it('publishes neither store to the host', () => {
    for (const name of ['redis', 'postgres'])
      expect(Object.keys(compose.services[name]!)).not.toContain('ports');
  });
});
