import { execa } from 'execa';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import dockerignoreModule from '@balena/dockerignore';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/config/config.js';

/**
 * Issue 24, item 5: docker-compose.yml ran Redis without a password and PostgreSQL with the default
 * `agenticfix`, while workers on other machines were told to connect to them. Whoever can write to
 * either can create runs for any installation the workers hold keys for, so no secret may have a
 * default: every one is `${VAR:?message}`, and compose refuses to start without it.
 */

const text = readFileSync('docker-compose.yml', 'utf8');
interface Service {
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  group_add?: string[];
  ports?: string[];
}
// `<<:` merges the shared app settings into each service, as compose does.
const compose = parse(text, { merge: true }) as {
  services: Record<string, Service>;
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

/** Issue 27, item 6: no healthchecks, a DOCKER_GID default wrong on most hosts, a 230 MB build context. */
describe('docker-compose.yml: start order and health', () => {
  it('checks every service, and starts serve and workers only once Redis and PostgreSQL are healthy', () => {
    for (const [name, service] of Object.entries(compose.services))
      expect([name, service.healthcheck?.test[0]]).toEqual([name, 'CMD']);
    for (const name of ['serve', 'worker'])
      expect(compose.services[name]!.depends_on).toEqual({
        redis: { condition: 'service_healthy' },
        postgres: { condition: 'service_healthy' },
      });
  });

  it("asks serve's and the workers' /healthz on the ports they listen on", () => {
    const port = (name: string) =>
      /http:\/\/127\.0\.0\.1:(\d+)\/healthz/.exec(compose.services[name]!.healthcheck!.test.join(' '))?.[1];
    expect(port('serve')).toBe(compose.services.serve!.ports![0]!.split(':').at(-1));
    const { AGENTICFIX_WORKER_PORT } = compose.services.worker!.environment!;
    const worker = loadConfig({ AGENTICFIX_WORKER_PORT: String(AGENTICFIX_WORKER_PORT) });
    expect(port('worker')).toBe(String(worker.workerListen.port));
  });

  // Issue 38, item 4: workers exposed 3000 (the image's) and listened on 3001; serve, with /runs and
  // /metrics, was published on every address of the host.
  it('lets workers listen on the port the image exposes, and publishes serve on 127.0.0.1 unless told', () => {
    const exposed = /^EXPOSE (\d+)$/m.exec(readFileSync('Dockerfile', 'utf8'))![1];
    expect(String(compose.services.worker!.environment!.AGENTICFIX_WORKER_PORT)).toBe(exposed);
    expect(compose.services.serve!.ports).toEqual([`\${PUBLISH_ADDRESS:-127.0.0.1}:${exposed}:${exposed}`]);
    for (const [name, image] of <[string, string][]>[
      ['redis', '${REDIS_IMAGE:-redis:7-alpine}'],
      ['postgres', '${POSTGRES_IMAGE:-postgres:16-alpine}'],
    ])
      expect((compose.services[name] as { image?: string }).image).toBe(image);
  });

  it('gives the workers the Docker socket group the operator sets, with no default', () => {
    expect(compose.services.worker!.group_add).toEqual([expect.stringMatching(/^\$\{DOCKER_GID:\?/)]);
  });
});

describe('.dockerignore', () => {
  // The package's CommonJS export, as src/environment/docker-context.ts takes it.
  const ignore = dockerignoreModule as unknown as typeof dockerignoreModule.default;
  const rules = ignore().add(readFileSync('.dockerignore', 'utf8'));
  const dockerfile = readFileSync('Dockerfile', 'utf8');

  it('keeps out of the build context what the image does not need, secrets included', () => {
    for (const p of [
      'node_modules/pino/package.json',
      '.git/HEAD',
      'runs/r1/events.jsonl',
      '.agenticfix/runs.sqlite',
      'dist/cli/index.js',
      '.env',
      '.env.production',
      'test/app.test.ts',
    ])
      expect([p, rules.ignores(p)]).toEqual([p, true]);
    expect(rules.ignores('.env.example')).toBe(false);
  });

  it('sends everything the Dockerfile copies from the context', () => {
    const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
    expect(copied).toEqual(expect.arrayContaining(['package.json', 'src', 'prompts']));
    for (const p of copied) expect([p, rules.ignores(p)]).toEqual([p, false]);
  });
});

/**
 * Issue 27, item 6: a worker's id and home were its container's id, so every restart left a home (mirrors,
 * image cache, worktrees) behind. The worker command takes the lowest free slot instead: run here as
 * compose would run it, with a stand-in for the worker process.
 */
describe('docker-compose.yml: stable worker slots', () => {
  const script = compose.services.worker!.command![2]!.replaceAll('$$', '$');
  const base = mkdtempSync(path.join(tmpdir(), 'agenticfix-slots-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  const worker = () => {
    const child = execa(
      'sh',
      [
        '-c',
        script.replaceAll('/srv/agenticfix', base).replace(
          /exec node dist\/cli\/index\.js worker$/,
          // The assignments before `exec` reach the program it runs, as they reach the worker.
          `exec sh -c 'echo "$AGENTICFIX_WORKER_ID $AGENTICFIX_HOME"; exec sleep 60'`,
        ),
      ],
      { env: { PATH: process.env.PATH!, WORKER_ID_PREFIX: 'h1-' }, extendEnv: false, reject: false },
    );
    const said = new Promise<string>((resolve) =>
      child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())),
    );
    return { child, said };
  };

  it('gives replicas distinct slots, and a restarted one the slot (id and home) its predecessor held', async () => {
    const a = worker();
    expect(await a.said).toBe(`h1-worker-1 ${base}/worker-1`);
    const b = worker();
    expect(await b.said).toBe(`h1-worker-2 ${base}/worker-2`);
    a.child.kill('SIGKILL'); // the lock goes with the process, however it ends
    await a.child;
    const c = worker();
    expect(await c.said).toBe(`h1-worker-1 ${base}/worker-1`);
    for (const w of [b, c]) w.child.kill('SIGKILL');
    await Promise.all([b.child, c.child]);
  });
});
