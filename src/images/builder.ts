import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { readBuildCa, withBuildCa } from './build-ca.js';
import { capped, message, readBuildOutput, type BuildOutput } from './build-progress.js';
import { BuildLogCompactor, compactBuildLog } from './buildlog.js';
import {
  CONTEXT_DOCKERFILE,
  environmentKey,
  fromImages,
  packContext,
  snapshotWorktree,
  type SnapshotEntry,
} from './docker-context.js';
import { gitDependencyHint } from './git-deps.js';
import { baseImages, describeBaseImage, type BaseImage } from './base-images.js';
import { answered } from '../environment/containers.js';
import { DockerSandbox, engineFailed, LABEL, RUN_LABEL } from '../environment/docker.js';
import { RunSandboxes, type WarmSandbox } from '../environment/warm.js';
import { buildNetworkMode, ensureBuildNetwork, proxyBuildArgs } from './network.js';
import { ImageLeases } from './leases.js';
import { Turns } from './turns.js';
import type { BuildLog, BuildOptions, BuildResult, EnvironmentBuilder } from '../environment/types.js';
import { stopwatch } from '../trace/phases.js';

/** Repository of every environment image; the tag is a prefix of the environment's content key. */
export const ENV_REPO = 'agenticfix-env';
/** The repository of the app's own base images (scripts/setup-docker.sh builds `agenticfix/debian:bookworm`). */
const APP_REPO = 'agenticfix';
export const KEY_LABEL = 'agenticfix.key';
/** Build time in milliseconds: Docker's `Created` has one-second resolution, too coarse to order recent builds. */
export const BUILT_LABEL = 'agenticfix.built';

/** Build errors that mean a base image could not be pulled: the model should pick a local one. */
const PULL_FAILURE =
  /pull access denied|manifest unknown|repository does not exist|no such host|dial tcp|i\/o timeout|TLS handshake|connection refused|toomanyrequests/i;

/** The part of `GET /system/df` that GC reads. */
const DiskUsageSchema = z.looseObject({
  Images: z.array(z.looseObject({ Id: z.string(), Size: z.number(), SharedSize: z.number() })).nullable(),
});

/**
 * Builds the model's Dockerfile against a real engine from an in-memory context (the worktree
 * snapshot plus the Dockerfile). Builds may use the network but never get secrets: no build
 * args, no registry credentials, no host mounts. Identical environments are built once.
 */
export class DockerEnvironmentBuilder implements EnvironmentBuilder {
  private readonly warm: RunSandboxes;
  private readonly leases: ImageLeases;
  /** Builds of one environment at once, here or in another process, take turns (buildOnce): the engine builds it once. */
  private readonly turns: Turns;

  constructor(
    private readonly docker: Docker,
    private readonly cfg: Config['sandbox'],
  ) {
    this.leases = new ImageLeases(docker, cfg.imageLeaseTtlMs, cfg.engineCallTimeoutMs);
    this.turns = new Turns({ dir: cfg.buildLockDir });
    this.warm = new RunSandboxes(docker, cfg);
  }

  async build(opts: BuildOptions): Promise<BuildResult> {
    const turn = { end: () => {} };
    const result = await this.buildOnce(opts, turn).finally(() => turn.end());
    if (result.success || opts.signal?.aborted) return result;
    if (!(await engineFailed(this.docker, this.cfg.engineCallTimeoutMs))) return result;
    return { ...result, engine_gone: true };
  }

  /** Builds or takes from the cache, holding the environment's turn (ended by `turn.end`) from its key on. */
  private async buildOnce(opts: BuildOptions, turn: { end: () => void }): Promise<BuildResult> {
    const elapsed = stopwatch();
    const settings = this.cfg.buildNetwork;
    const network = { proxy: settings.proxy !== undefined, ca: settings.caFile !== undefined };
    const failed = (error: string, log: BuildLog): BuildResult => ({
      success: false,
      image_id: null,
      image_tag: null,
      cache_hit: false,
      duration_ms: elapsed(),
      network,
      log,
      warnings: [],
      cached_steps: [],
      error,
    });

    let snapshot;
    try {
      snapshot = await snapshotWorktree(opts.worktree, this.cfg.buildContextMaxBytes);
    } catch (err) {
      return failed(`cannot read the worktree: ${message(err)}`, compactBuildLog([], 'failed'));
    }
    // The CA is read at every build, so a changed bundle changes the key (it is a copied context file).
    const ca = settings.caFile ? await readBuildCa(settings.caFile) : null;
    if (typeof ca === 'string') return failed(`build network: ${ca}`, compactBuildLog([], 'failed'));
    const build = ca
      ? { ...withBuildCa(opts.dockerfile), context: [...snapshot, ca] }
      : { dockerfile: opts.dockerfile, added: 0, context: snapshot };
    const baseIds = await Promise.all(fromImages(opts.dockerfile).map((name) => this.imageId(name)));
    const key = environmentKey(build.dockerfile, build.context, baseIds);
    // A forced rebuild (the judge's) gets a tag of its own: taking over the shared tag would leave the
    // image another run is still testing in untagged, and GC removes untagged images.
    const tag = `${ENV_REPO}:${key.slice(0, 20)}${opts.noCache ? `-${opts.runId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80)}` : ''}`;
    // The same environment being built already (another attempt of the run side by side, or another
    // process on this engine): once that build is over, this one is a cache hit.
    if (!opts.noCache) turn.end = await this.turns.take(tag, opts.signal);

    if (!opts.noCache) {
      const cached = await this.inspect(tag).catch(() => null);
      // Leased before use: from then on no cleanup, in this process or another, can remove it. An image
      // removed between the inspection and the lease is simply built again.
      const leased =
        cached?.Config.Labels?.[KEY_LABEL] === key &&
        (await this.leases.acquire(opts.runId, cached.Id).then(
          () => true,
          () => false,
        ));
      if (cached && leased) {
        const log = compactBuildLog([`cache hit: identical environment already built as ${tag}`], 'ok');
        return {
          success: true,
          image_id: cached.Id,
          image_tag: tag,
          cache_hit: true,
          duration_ms: elapsed(),
          network,
          log,
          warnings: [],
          cached_steps: [],
          error: null,
        };
      }
    }

    // Its engine requests (an inspection, a creation, another) wait on the engine: a hung one fails the build.
    const bridge = () => ensureBuildNetwork(this.docker, this.cfg.buildNetwork);
    const callMs = 3 * this.cfg.engineCallTimeoutMs;
    const unavailable = await answered('the build network', bridge, callMs).then(
      () => null,
      (err: unknown) => message(err),
    );
    if (unavailable) return failed(`build network: ${unavailable}`, compactBuildLog([], 'failed'));
    const run = await this.runBuild(opts, build, tag, key);
    if (run.status !== 'ok') {
      const log = run.log.result(run.status);
      let error = run.error ?? 'build failed';
      if (PULL_FAILURE.test(error)) {
        const local = await this.localBaseImages().catch(() => []);
        error += `\nNo registry is reachable. Base images available locally: ${local.join(', ') || '(none)'}`;
      }
      const gitHint = gitDependencyHint([...log.error_lines, ...log.tail], opts.worktree);
      if (gitHint) error += `\n${gitHint}`;
      return failed(error, log);
    }
    // The stream can end without an error entry although nothing was built: trust only the engine.
    const image = await this.inspect(tag).catch(() => null);
    if (!image || image.Config.Labels?.[KEY_LABEL] !== key) {
      return failed('the build finished but produced no image', run.log.result('failed'));
    }
    const leased = await this.leases.acquire(opts.runId, image.Id).then(
      () => true,
      () => false,
    );
    if (!leased)
      return failed(
        'the image was removed by a concurrent cleanup before it could be leased; build again',
        run.log.result('failed'),
      );
    await this.gc({ protect: image.Id }).catch(() => undefined);
    return {
      success: true,
      image_id: image.Id,
      image_tag: tag,
      cache_hit: false,
      duration_ms: elapsed(),
      network,
      log: run.log.result('ok'),
      warnings: run.log.findings.warnings(),
      cached_steps: run.cachedSteps,
      error: null,
    };
  }

  /** Fresh containers per call (the judge's cells); one builder serves every run, each labelled with its own. */
  sandboxFor(imageId: string, runId: string): DockerSandbox {
    return new DockerSandbox(this.docker, imageId, this.cfg, runId);
  }

  /** The run's tool calls' sandbox: one warm container; the run's previous one is removed. */
  runSandboxFor(imageId: string, runId: string): WarmSandbox {
    return this.warm.open(imageId, runId);
  }

  /**
   * What a Dockerfile can start FROM offline: the operator's configured base image and the app's own
   * images (`agenticfix/…`: the Debian base and the language images) that are here, language images
   * first. Other tagged images on the host (other projects', the environments built for runs) are no
   * one's advice to the model.
   */
  async baseImages(): Promise<BaseImage[]> {
    const images = await this.answered('a listing of images', (o) => this.docker.listImages(o));
    return baseImages(images, (t) => t === this.cfg.baseImage || t.startsWith(`${APP_REPO}/`));
  }

  /** The base images as the model reads them, language images first with their runtime's version. */
  async localBaseImages(): Promise<string[]> {
    return (await this.baseImages()).map(describeBaseImage);
  }

  /**
   * Removes the run's warm container and ends the run's leases on its images (also those another builder
   * of the run took), at once: the engine keeps an image while a container of it is there either way.
   */
  async release(runId: string): Promise<void> {
    await Promise.all([this.warm.close(runId), this.leases.release(runId)]);
  }

  /**
   * Removes one image by reference (a tag of its own, e.g. the judge's); an image still leased or
   * used by a container is refused by the engine and stays for GC. Never throws.
   */
  async removeImage(ref: string): Promise<boolean> {
    return this.answered('an image removal', (o) => this.docker.getImage(ref).remove(o)).then(
      () => true,
      () => false,
    );
  }

  /**
   * Removes environment images beyond the newest `imageKeep`, older than `imageMaxAgeMs`, and then the
   * oldest while they hold more than `imageMaxBytes`. Leased images are never removed (in this process
   * or another); leases whose holder stopped renewing them are reclaimed first. `runId` limits all of
   * it to one run's images; images in use by a container are refused by the engine.
   */
  async gc(opts: { runId?: string; protect?: string; now?: number } = {}): Promise<string[]> {
    const label = [`${LABEL}=1`, ...(opts.runId ? [`${RUN_LABEL}=${opts.runId}`] : [])];
    const images = await this.answered('a listing of images', (o) =>
      this.docker.listImages({ ...o, filters: { label } }),
    );
    const now = opts.now ?? Date.now();
    const scope = new Set(images.map((i) => i.Id));
    const leased = await ImageLeases.live(this.docker, scope, now, this.cfg.engineCallTimeoutMs);
    const spared = (id: string) => id === opts.protect || leased.has(id);
    const removed: string[] = [];
    const remove = async (ref: string) => {
      const ok = await this.removeImage(ref);
      if (ok) removed.push(ref);
      return ok;
    };
    // Dangling: a build that lost its tag (e.g. the same run id built again).
    for (const img of images.filter((i) => !(i.RepoTags ?? []).some((t) => t !== '<none>:<none>')))
      if (!spared(img.Id)) await remove(img.Id);

    const tagged = images
      .flatMap((i) =>
        (i.RepoTags ?? [])
          .filter((t) => t.startsWith(`${ENV_REPO}:`))
          .map((tag) => ({
            tag,
            id: i.Id,
            size: i.Size,
            created: Number(i.Labels?.[BUILT_LABEL]) || i.Created * 1000,
          })),
      )
      .sort((a, b) => b.created - a.created);
    const kept: typeof tagged = [];
    for (const [i, img] of tagged.entries()) {
      const keep = i < this.cfg.imageKeep && now - img.created <= this.cfg.imageMaxAgeMs;
      // Removing by tag only untags an image that other environments share.
      if (spared(img.id) || keep || !(await remove(img.tag))) kept.push(img);
    }

    // Size cap, oldest first. The virtual sizes bound the real ones from above: only when they exceed
    // the cap is the engine asked for what each image holds alone (what removing it frees).
    const total = (sizes: Map<string, number>) =>
      [...new Set(kept.map((k) => k.id))].reduce((sum, id) => sum + (sizes.get(id) ?? 0), 0);
    if (total(new Map(kept.map((k) => [k.id, k.size]))) <= this.cfg.imageMaxBytes) return removed;
    const own = await this.ownSizes();
    let bytes = total(own);
    for (const img of [...kept].reverse()) {
      if (bytes <= this.cfg.imageMaxBytes) break;
      if (!spared(img.id) && (await remove(img.tag))) bytes -= own.get(img.id) ?? 0;
    }
    return removed;
  }

  /** Bytes each image holds in layers of its own, from the engine's disk usage report. */
  private async ownSizes(): Promise<Map<string, number>> {
    // dockerode's types omit df's options; its code passes their abortSignal on.
    const report = this.docker.df.bind(this.docker) as unknown as (o: object) => Promise<unknown>;
    const df = DiskUsageSchema.parse(await this.answered('a disk usage report', report));
    return new Map((df.Images ?? []).map((i) => [i.Id, Math.max(0, i.Size - Math.max(0, i.SharedSize))]));
  }

  private async imageId(name: string): Promise<string> {
    const img = await this.inspect(name).catch(() => null);
    return img?.Id ?? `remote:${name}`;
  }

  private inspect(ref: string): Promise<Docker.ImageInspectInfo> {
    return this.answered('an image inspection', () => this.docker.getImage(ref).inspect());
  }

  /** One engine request, given up after the engine-call bound (a hung engine answers pings only). */
  private answered<T>(what: string, request: (o: { abortSignal: AbortSignal }) => Promise<T>): Promise<T> {
    return answered(what, request, this.cfg.engineCallTimeoutMs);
  }

  /**
   * Streams one build; failures come from the stream's error entries, a timeout, the output cap or
   * an abort. Nothing here throws: every failure becomes the result's error.
   */
  private async runBuild(
    opts: BuildOptions,
    /** The Dockerfile and context sent to the engine, with `added` steps the model did not write. */
    build: { dockerfile: string; context: SnapshotEntry[]; added: number },
    tag: string,
    key: string,
  ): Promise<{
    status: BuildLog['exit_status'];
    log: BuildLogCompactor;
    error: string | null;
    cachedSteps: number[];
  }> {
    // Aborting destroys the request: the engine then cancels the build and kills its RUN container.
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, this.cfg.buildTimeoutMs);
    const onAbort = () => abort.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.signal?.aborted) abort.abort();

    let read: BuildOutput = { log: new BuildLogCompactor(), error: null, lastLayer: null };
    const labels = {
      [LABEL]: '1',
      [RUN_LABEL]: opts.runId,
      [KEY_LABEL]: key,
      [BUILT_LABEL]: String(Date.now()),
    };
    // The engine adds one LABEL step per label after the model's steps: progress leaves them out.
    const modelSteps = (total: number) => total - Object.keys(labels).length;
    const onStep = (line: string) => {
      const m = /^Step (\d+)\/(\d+) : (.*)$/.exec(line);
      const total = modelSteps(Number(m?.[2]));
      if (m && Number(m[1]) <= total) opts.onStep?.(`Step ${m[1]}/${total} : ${m[3]!.slice(0, 200)}`);
    };
    try {
      const stream = (await this.docker.buildImage(packContext(build.context, build.dockerfile), {
        t: tag,
        dockerfile: CONTEXT_DOCKERFILE,
        labels,
        nocache: opts.noCache === true,
        // Builds reach the internet (or the proxy) but not the host or internal networks: see network.ts.
        networkmode: buildNetworkMode(this.cfg.buildNetwork),
        buildargs: proxyBuildArgs(this.cfg.buildNetwork),
        rm: true,
        forcerm: true,
        abortSignal: abort.signal,
      })) as Readable;
      read = await readBuildOutput(stream, this.cfg.buildMaxOutputBytes, build.added, onStep);
    } catch (err) {
      read.error = capped(message(err));
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
    const { log, lastLayer } = read;
    let error = read.error;
    if (timedOut) error = `build timed out after ${this.cfg.buildTimeoutMs} ms`;
    else if (opts.signal?.aborted) error = 'build cancelled';
    if (error !== null) {
      // Stops the engine's build when the stream was given up early (output cap, unreadable entry).
      abort.abort();
      // Removal prunes its untagged parents too; a layer still in use (another build's cache) stays.
      if (lastLayer) await this.removeImage(lastLayer);
    }
    const status = timedOut ? 'timeout' : error === null ? 'ok' : 'failed';
    return { status, log, error, cachedSteps: log.findings.cachedSteps(modelSteps) };
  }
}
