import { rmSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import type { ResultPromise } from 'execa';
import type { RunningApp } from '../../src/app.js';
import type { Config } from '../../src/config/config.js';
import type { GitHubEmulator } from '../../src/emulator/github.js';
import type { ScriptedModelServer } from '../../src/emulator/scripted-model.js';
import { RUN_LABEL } from '../../src/environment/docker.js';
import { sweepContainers } from '../../src/environment/startup.js';
import { LEASE_LABEL } from '../../src/images/leases.js';
import type { RunRecord } from '../../src/store/store.js';
import { startEmulatedApp, startEmulator, tempDir, testConfig } from './app.js';
import { needDocker } from './docker.js';
import { startChild, until } from './e2e.js';
import { needService, servicePlace } from './services.js';
import { needAll, type Need } from './skip.js';

/**
 * The app distributed: `serve` in this process takes the GitHub emulator's webhooks and enqueues on
 * Redis; `agenticfix worker` processes (the built CLI, each with its own home) run the runs in the real
 * Docker sandbox with a scripted model; the run store is PostgreSQL. Each world has a schema, a queue
 * and a home of its own.
 */

/** The owner of every repository of a world; `maint` may write to them, `rae` opens the issues. */
export const OWNER = 'octo';

/** What a distributed world needs: the Docker engine, Redis and PostgreSQL (at the module's top). */
export async function needDistributed(): Promise<Need> {
  return needAll(
    await needDocker(),
    needService('AGENTICFIX_TEST_REDIS_URL'),
    needService('AGENTICFIX_TEST_DATABASE_URL'),
  );
}

export interface DistributedWorldOptions {
  /** Names the home, the schema and the queue (with this process's id and a random suffix). */
  name: string;
  /** The scripted model the workers ask, given serve's config (its base image). */
  model: (config: Config) => Promise<ScriptedModelServer>;
  /** The repositories of OWNER by name, each from the directory its function writes under the home (repoSource). */
  repos: Record<string, (home: string) => string>;
  /** Runs each worker takes at once (2 unless said); the workers are w1 and w2. */
  concurrency?: number;
  /** Settings of serve and the workers beyond the services'. */
  env?: Record<string, string>;
}

export interface WorkerProcess {
  child: ResultPromise;
  /** What it printed so far. */
  out(): string;
}

export interface DistributedWorld {
  emu: GitHubEmulator;
  /** serve. */
  app: RunningApp;
  model: ScriptedModelServer;
  /** The workers by id (w1, w2). */
  workers: Map<string, WorkerProcess>;
  /** The bot's comments on issue or pull request `n` of `repo`, oldest first. */
  bot(repo: string, n: number): string[];
  /** rae's issue `title` on `repo`, labelled `agenticfix` by maint; its number. */
  labelled(repo: string, title: string): Promise<number>;
  /** The run of issue `n` once `done` holds for it (it exists and has ended, unless said). */
  runOf(
    repo: string,
    n: number,
    ms: number,
    done?: (run: RunRecord) => boolean | Promise<boolean>,
  ): Promise<RunRecord>;
  /** The run of issue `n` once it runs `containers` test containers (its attempts' included). */
  whenTesting(repo: string, n: number, ms: number, containers?: number): Promise<RunRecord>;
  /** maint's `/agenticfix cancel` on issue `n`; waits (`ms` each) for `run` to be cancelled and its containers gone; the ms that took. */
  cancel(repo: string, n: number, run: string, ms: number): Promise<number>;
  /** Stops the workers, serve, the model and the emulator; sweeps containers, drops the schema, removes the home. */
  close(): Promise<void>;
}

const ended = (run: RunRecord) => run.finished_at !== null;

export async function startDistributedWorld(o: DistributedWorldOptions): Promise<DistributedWorld> {
  const place = servicePlace(o.name.replace(/\W/g, '_'));
  // A short lock, so a killed worker's run is found within seconds.
  const env = { ...place.env, AGENTICFIX_WORKER_LOCK_MS: '4000', ...o.env };
  const home = tempDir(`${o.name}-`);
  const workers = new Map<string, WorkerProcess>();
  const emu = await startEmulator();
  let model: ScriptedModelServer | undefined;
  let app: RunningApp | undefined;
  const close = async () => {
    for (const w of workers.values()) w.child.kill('SIGTERM');
    await Promise.all([...workers.values()].map((w) => w.child));
    await app?.close();
    await model?.close();
    await emu.close();
    await sweepContainers(new Docker()); // what a killed worker left
    await place.drop();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    const config = testConfig(path.join(home, 'serve'), env);
    model = await o.model(config);
    for (const [repo, source] of Object.entries(o.repos)) {
      emu.createRepo(OWNER, repo, { fromDir: source(home) });
      emu.setPermission(OWNER, repo, 'maint', 'write');
    }
    app = await startEmulatedApp(emu, { config });
    emu.setWebhookUrl(app.url);
    for (const id of ['w1', 'w2']) {
      const role = { role: 'worker', workerId: id, concurrency: o.concurrency ?? 2 } as const;
      workers.set(id, startChild(emu, role, path.join(home, id), model.url, env));
    }
    for (const [id, w] of workers)
      await until(`${id} to take runs`, () => w.out().includes('taking runs'), 60_000);
  } catch (e) {
    await close();
    throw e;
  }
  const serve = app;
  // The sandbox containers testing for runs whose id starts with `run` (its attempts' too), leases left out.
  const testing = async (run: string) =>
    (await new Docker().listContainers({ filters: { label: [RUN_LABEL] } })).filter(
      (c) => !c.Labels[LEASE_LABEL] && c.Labels[RUN_LABEL]!.startsWith(run),
    );
  const world: DistributedWorld = {
    emu,
    app: serve,
    model,
    workers,
    bot: (repo, n) =>
      emu
        .comments(n, `${OWNER}/${repo}`)
        .filter((c) => c.user === emu.botLogin)
        .map((c) => c.body),
    async labelled(repo, title) {
      const n = emu.createIssue(OWNER, repo, { title, user: 'rae' });
      const label = await emu.label(OWNER, repo, n, 'agenticfix', 'maint');
      if (label.status !== 200) throw new Error(`labelling ${repo}#${n} answered ${label.status}`);
      return n;
    },
    async runOf(repo, n, ms, done = ended) {
      let run: RunRecord | undefined;
      await until(
        `the run of ${repo}#${n}`,
        async () =>
          (run = (await serve.store.forIssue(OWNER, repo, n))[0]) !== undefined && (await done(run)),
        ms,
      );
      return run!;
    },
    whenTesting: (repo, n, ms, containers = 1) =>
      world.runOf(
        repo,
        n,
        ms,
        async (r) => r.state === 'running' && (await testing(r.id)).length >= containers,
      ),
    async cancel(repo, n, run, ms) {
      const t0 = Date.now();
      await emu.comment(OWNER, repo, n, '/agenticfix cancel', 'maint');
      await until(
        'the run to be cancelled',
        async () => (await serve.store.get(run))?.state === 'cancelled',
        ms,
      );
      await until('its test containers to be gone', async () => (await testing(run)).length === 0, ms);
      return Date.now() - t0;
    },
    close,
  };
  return world;
}
