import { statSync } from 'node:fs';
import Docker from 'dockerode';
import { Redis } from 'ioredis';
import pg from 'pg';
import { z } from 'zod';
import { resolveModel } from '../config/providers.js';
import { ConfigError, loadConfig, loadEnv, type Config } from '../config/config.js';
import { unknownSettings } from '../config/env.js';
import { costRefusal } from '../pipeline/pricing.js';
import { ensureBuildNetwork } from '../images/network.js';
import { stripUserinfo } from '../workspace/git.js';
import { appCredentials, emptyUnset, issuesLine, type AppCredentials } from './app-env.js';
import { command, parseCli } from './program.js';

/** What `serve` reads beyond the app's credentials. */
const ServeEnv = z.object({
  WEBHOOK_SECRET: z.string().min(1),
  WEBHOOK_PROXY_URL: z.url().optional(),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
});
export type ServeSettings = z.infer<typeof ServeEnv>;

export type Role = 'serve' | 'worker';

/** One start-up check; `detail` says, when it failed, what to set or run. */
export interface CheckResult {
  name: 'settings' | 'model' | 'docker' | 'base image' | 'build network' | 'redis' | 'postgresql';
  ok: boolean;
  detail: string;
}

/** The start-up check's answer: each check, warnings, and what a passing one found. */
export interface Checked {
  checks: CheckResult[];
  warnings: string[];
  /** Null when a check failed; `serve` is null when the serve settings did not parse (a worker's check). */
  ready: { app: AppCredentials; config: Config; serve: ServeSettings | null } | null;
}

/** Settles within `ms` or rejects saying it did not answer. */
function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

const reason = (err: unknown) => {
  const e = err as NodeJS.ErrnoException & { errors?: Error[] };
  // Node's connection errors to `localhost` are AggregateErrors (one per address) with no message.
  const inner = e.errors?.[0] as NodeJS.ErrnoException | undefined;
  return e.code ?? inner?.code ?? (e.message || String(err));
};

/**
 * The start-up check of `serve` and `worker` (and `agenticfix doctor`): the settings, then each service
 * this role needs, each within AGENTICFIX_CHECK_TIMEOUT_S. Services are checked only when the settings
 * they depend on parsed.
 */
export async function startupCheck(
  role: Role,
  raw: Record<string, string> = loadEnv(),
  docker = new Docker(),
): Promise<Checked> {
  const problems: string[] = [];
  const app = appCredentials(raw);
  if (typeof app === 'string') problems.push(app);
  const serve = ServeEnv.safeParse(emptyUnset(raw));
  if (role === 'serve' && !serve.success) problems.push(issuesLine(serve.error));
  let config: Config | null = null;
  try {
    config = loadConfig(raw);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(err.message.replace(/^invalid configuration:\s*/, '').replace(/\s*\n\s*/g, '; '));
  }
  if (role === 'worker' && config && !config.distributed)
    problems.push(
      'AGENTICFIX_REDIS_URL and AGENTICFIX_DATABASE_URL are not set (the queue and the run store serve shares)',
    );
  const checks: CheckResult[] = [
    { name: 'settings', ok: problems.length === 0, detail: problems.join('; ') },
  ];
  const warnings = unknownSettings(raw);
  if (!config) return { checks, warnings, ready: null };
  // Every run of the operator's model would be refused at its start: said now, not at the first label.
  const unpriced = costRefusal({ kind: 'openai' }, config.model, config.budgets.costUsd);
  if (unpriced) warnings.push(`${unpriced} Until then every run of it is refused.`);

  const ms = config.checkTimeoutMs;
  const runsHere = role === 'worker' || !config.distributed;
  const probe = async (name: CheckResult['name'], work: () => Promise<string | null>) => {
    const detail = await within(ms, work()).catch((err: unknown) => String((err as Error).message ?? err));
    // One line each: tools' output (iptables, the engine) comes with line breaks.
    checks.push({ name, ok: detail === null, detail: detail?.replace(/\s*\n\s*/g, ' ') ?? '' });
  };
  if (runsHere) {
    await probe('model', () => modelAnswers(config));
    await probe('docker', async () => {
      try {
        await docker.ping();
        return null;
      } catch (err) {
        return dockerProblem(err);
      }
    });
    if (checks.at(-1)!.ok) {
      await probe('base image', async () => {
        try {
          await docker.getImage(config.sandbox.baseImage).inspect();
          return null;
        } catch {
          return `the base image ${config.sandbox.baseImage} is missing: run \`bash scripts/setup-docker.sh\` (as root), or set AGENTICFIX_BASE_IMAGE`;
        }
      });
      // Fail at start-up, not in every run, when builds cannot be kept off the host and internal networks.
      await probe('build network', async () => {
        try {
          await ensureBuildNetwork(docker, config.sandbox.buildNetwork);
          return null;
        } catch (err) {
          return `${(err as Error).message} (AGENTICFIX_BUILD_NETWORK=${config.sandbox.buildNetwork.mode})`;
        }
      });
    }
  }
  if (config.distributed) {
    const url = config.distributed.redisUrl;
    await probe('redis', async () => {
      const redis = new Redis(url, {
        lazyConnect: true,
        connectTimeout: ms,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      // The socket's error says why; connect() itself only says "Connection is closed".
      let socketError: unknown;
      redis.on('error', (err) => (socketError = err));
      try {
        await redis.connect();
        await redis.ping();
        return null;
      } catch (err) {
        return `Redis at ${stripUserinfo(url)} does not answer (${reason(socketError ?? err)}): start it or fix AGENTICFIX_REDIS_URL`;
      } finally {
        redis.disconnect();
      }
    });
  }
  if (config.databaseUrl) {
    const url = config.databaseUrl;
    await probe('postgresql', async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: ms });
      client.on('error', () => {}); // reported below, once
      try {
        await client.connect();
        await client.query('select 1');
        return null;
      } catch (err) {
        return `PostgreSQL at ${stripUserinfo(url)} does not answer (${reason(err)}): start it or fix AGENTICFIX_DATABASE_URL`;
      } finally {
        await client.end().catch(() => {});
      }
    });
  }
  const ok = checks.every((c) => c.ok);
  return {
    checks,
    warnings,
    ready: ok && typeof app !== 'string' ? { app, config, serve: serve.success ? serve.data : null } : null,
  };
}

/** The configured model's endpoint answers (any HTTP answer but a refused key): null, else the problem. */
async function modelAnswers(config: Config): Promise<string | null> {
  let model;
  try {
    model = resolveModel(config.model);
  } catch (err) {
    return `no model: ${(err as Error).message}`;
  }
  const url = `${model.baseUrl.replace(/\/+$/, '')}/models`;
  try {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${model.apiKey}` },
      signal: AbortSignal.timeout(config.checkTimeoutMs),
    });
    await res.body?.cancel();
    if (res.status === 401 || res.status === 403)
      return `the model endpoint ${stripUserinfo(model.baseUrl)} refused the key (HTTP ${res.status}): check AGENTICFIX_MODEL_API_KEY`;
    return null;
  } catch (err) {
    const cause = (err as Error & { cause?: unknown }).cause ?? err;
    return `the model endpoint ${stripUserinfo(model.baseUrl)} does not answer (${reason(cause)}): start it or fix AGENTICFIX_MODEL_BASE_URL`;
  }
}

function dockerProblem(err: unknown): string {
  const code = reason(err);
  const host = process.env.DOCKER_HOST;
  const socket = host?.startsWith('unix://')
    ? host.slice('unix://'.length)
    : (host ?? '/var/run/docker.sock');
  if (code === 'EACCES') {
    // The socket's group is the host's docker group: its number differs between hosts.
    let gid: number | null = null;
    try {
      gid = statSync(socket).gid;
    } catch {
      // named generically below
    }
    const group = gid === null ? `$(stat -c %g ${socket})` : String(gid);
    return `cannot open ${socket} (permission denied): run as a member of its group${gid === null ? '' : ` (${gid})`}: \`usermod -aG ${group} <user>\`, in a container \`docker run --group-add ${group}\` (\`--group-add $(stat -c %g ${socket})\`), with compose DOCKER_GID=${group} in .env`;
  }
  return `no Docker engine answers at ${host ?? socket} (${code}): start one (\`bash scripts/setup-docker.sh\` as root) or set DOCKER_HOST`;
}

/** Prints what failed, one line each, and the warnings; true when the role may start. */
export function reportCheck(role: Role, checked: Checked): boolean {
  for (const w of checked.warnings) process.stderr.write(`agenticfix ${role}: warning: ${w}\n`);
  for (const c of checked.checks)
    if (!c.ok) process.stderr.write(`agenticfix ${role}: ${c.name}: ${c.detail}\n`);
  return checked.ready !== null;
}

const cli = () =>
  command('doctor', 'run the start-up check of serve or worker alone and report each check')
    .option('--worker', 'check as `agenticfix worker` does (default: as serve does)', false)
    .option('--json', 'print {ok, role, checks, warnings} as JSON', false);

const Flags = z.strictObject({ worker: z.boolean(), json: z.boolean() });

/** `agenticfix doctor`: exit 0 when serve (or the worker) would start, else 2. */
export async function doctorCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(cli(), Flags, argv);
  if (typeof parsed === 'number') return parsed;
  const role: Role = parsed.opts.worker ? 'worker' : 'serve';
  const checked = await startupCheck(role);
  const ok = checked.ready !== null;
  if (parsed.opts.json)
    process.stdout.write(
      `${JSON.stringify({ ok, role, checks: checked.checks, warnings: checked.warnings }, null, 2)}\n`,
    );
  else {
    for (const c of checked.checks)
      process.stdout.write(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}${c.ok ? '' : `: ${c.detail}`}\n`);
    for (const w of checked.warnings) process.stdout.write(`warn  ${w}\n`);
  }
  return ok ? 0 : 2;
}
