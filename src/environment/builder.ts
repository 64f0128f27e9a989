import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { BuildLogCompactor, compactBuildLog } from './buildlog.js';
import {
  CONTEXT_DOCKERFILE,
  environmentKey,
  fromImages,
  packContext,
  snapshotWorktree,
} from './docker-context.js';
import { DockerSandbox, LABEL, RUN_LABEL } from './docker.js';
import { buildNetworkMode, ensureBuildNetwork, proxyBuildArgs } from './network.js';
import type { BuildLog, BuildResult, EnvironmentBuilder } from './types.js';

/** Repository of every environment image; the tag is a prefix of the environment's content key. */
export const ENV_REPO = 'agenticfix-env';
export const KEY_LABEL = 'agenticfix.key';
/** Build time in milliseconds: Docker's `Created` has one-second resolution, too coarse to order recent builds. */
export const BUILT_LABEL = 'agenticfix.built';

/** One entry of the Engine's build progress stream (other fields, such as progress bars, are dropped). */
const BuildEvent = z.object({
  stream: z.string().optional(),
  status: z.string().optional(),
  error: z.string().optional(),
  errorDetail: z.object({ message: z.string().optional() }).optional(),
});
type BuildEvent = z.infer<typeof BuildEvent>;

/** Longest progress entry accepted: the engine sends a container's output in chunks of at most 32 KiB. */
const MAX_EVENT_BYTES = 1024 * 1024;
/** Longest error message kept from the engine. */
const MAX_ERROR_CHARS = 2000;
const MiB = 1024 * 1024;

/** Build errors that mean a base image could not be pulled: the model should pick a local one. */
const PULL_FAILURE =
  /pull access denied|manifest unknown|repository does not exist|no such host|dial tcp|i\/o timeout|TLS handshake|connection refused|toomanyrequests/i;

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
const capped = (text: string) =>
  text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;

/**
 * Reads the engine's progress stream, one JSON entry per line, in bounded memory. (dockerode's
 * followProgress keeps every entry, so a noisy build exhausts memory, and a line that is not JSON
 * throws from its stream handler, which ends the process.) Resolves when the stream ends; rejects
 * on a stream error, an unreadable entry, or once more than `maxBytes` have arrived.
 */
export function readProgress(
  stream: Readable,
  maxBytes: number,
  onEvent: (ev: BuildEvent) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let pending = Buffer.alloc(0);
    let bytes = 0;
    let done = false;
    const finish = (err?: unknown) => {
      if (done) return;
      done = true;
      stream.off('data', onData);
      if (err === undefined) return resolve();
      stream.destroy();
      reject(err instanceof Error ? err : new Error(String(err)));
    };
    const entry = (line: string) => {
      let json: unknown;
      try {
        json = JSON.parse(line);
      } catch {
        throw new Error(`the engine sent an unreadable progress entry: ${line.slice(0, 200)}`);
      }
      const ev = BuildEvent.safeParse(json);
      if (!ev.success) throw new Error(`the engine sent an unexpected progress entry: ${line.slice(0, 200)}`);
      onEvent(ev.data);
    };
    const onData = (chunk: Buffer | string) => {
      try {
        const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        bytes += buf.length;
        if (bytes > maxBytes) throw new BuildOutputCap(maxBytes);
        const all = pending.length > 0 ? Buffer.concat([pending, buf]) : buf;
        let from = 0;
        for (let nl = all.indexOf(10); nl >= 0; nl = all.indexOf(10, from)) {
          const line = all.toString('utf8', from, nl).trim();
          from = nl + 1;
          if (line !== '') entry(line);
        }
        // Copied: a view would keep the whole chunk alive.
        pending = Buffer.from(all.subarray(from));
        if (pending.length > MAX_EVENT_BYTES) throw new Error('the engine sent a progress entry over 1 MiB');
      } catch (err) {
        finish(err);
      }
    };
    stream.on('data', onData);
    // Stays attached: an error after the end (or after an abort) must not become an uncaught one.
    stream.on('error', (err) => finish(new Error(`the build stream broke off: ${err.message}`)));
    stream.once('end', () => finish());
    stream.once('close', () => finish());
  });
}

/** The build printed more than the configured cap. */
class BuildOutputCap extends Error {
  constructor(maxBytes: number) {
    super(
      `build output cap: the build printed more than ${Math.round(maxBytes / MiB)} MiB (AGENTICFIX_BUILD_MAX_OUTPUT_MB); make its steps quieter (e.g. apt-get -qq, pip -q, npm --silent)`,
    );
  }
}

export interface BuildOptions {
  dockerfile: string;
  worktree: string;
  runId: string;
  noCache?: boolean;
  signal?: AbortSignal;
}

/**
 * Builds the model's Dockerfile against a real engine from an in-memory context (the worktree
 * snapshot plus the Dockerfile). Builds may use the network but never get secrets: no build
 * args, no registry credentials, no host mounts. Identical environments are built once.
 */
export class DockerEnvironmentBuilder implements EnvironmentBuilder {
  /** Which run first asked for each image, so its containers carry that run's label. */
  private readonly runOf = new Map<string, string>();

  constructor(
    private readonly docker: Docker,
    private readonly cfg: Config['sandbox'],
  ) {}

  async build(opts: BuildOptions): Promise<BuildResult> {
    const started = Date.now();
    const failed = (error: string, log: BuildLog): BuildResult => ({
      success: false,
      image_id: null,
      image_tag: null,
      cache_hit: false,
      duration_ms: Date.now() - started,
      log,
      error,
    });

    let snapshot;
    try {
      snapshot = await snapshotWorktree(opts.worktree, this.cfg.buildContextMaxBytes);
    } catch (err) {
      return failed(`cannot read the worktree: ${message(err)}`, compactBuildLog([], 'failed'));
    }
    const baseIds = await Promise.all(fromImages(opts.dockerfile).map((name) => this.imageId(name)));
    const key = environmentKey(opts.dockerfile, snapshot, baseIds);
    // A forced rebuild (the judge's) gets a tag of its own: taking over the shared tag would leave the
    // image another run is still testing in untagged, and GC removes untagged images.
    const tag = `${ENV_REPO}:${key.slice(0, 20)}${opts.noCache ? `-${opts.runId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80)}` : ''}`;

    if (!opts.noCache) {
      const cached = await this.docker
        .getImage(tag)
        .inspect()
        .catch(() => null);
      if (cached && cached.Config.Labels?.[KEY_LABEL] === key) {
        this.runOf.set(cached.Id, this.runOf.get(cached.Id) ?? opts.runId);
        const log = compactBuildLog([`cache hit: identical environment already built as ${tag}`], 'ok');
        return {
          success: true,
          image_id: cached.Id,
          image_tag: tag,
          cache_hit: true,
          duration_ms: Date.now() - started,
          log,
          error: null,
        };
      }
    }

    const unavailable = await ensureBuildNetwork(this.docker, this.cfg.buildNetwork).then(
      () => null,
      (err: unknown) => message(err),
    );
    if (unavailable) return failed(`build network: ${unavailable}`, compactBuildLog([], 'failed'));
    const run = await this.runBuild(opts, snapshot, tag, key);
    if (run.status !== 'ok') {
      const log = run.log.result(run.status);
      let error = run.error ?? 'build failed';
      if (PULL_FAILURE.test(error)) {
        const local = await this.localBaseImages().catch(() => []);
        error += `\nNo registry is reachable. Base images available locally: ${local.join(', ') || '(none)'}`;
      }
      return failed(error, log);
    }
    // The stream can end without an error entry although nothing was built: trust only the engine.
    const image = await this.docker
      .getImage(tag)
      .inspect()
      .catch(() => null);
    if (!image || image.Config.Labels?.[KEY_LABEL] !== key) {
      return failed('the build finished but produced no image', run.log.result('failed'));
    }
    this.runOf.set(image.Id, opts.runId);
    await this.gc({ protect: image.Id }).catch(() => undefined);
    return {
      success: true,
      image_id: image.Id,
      image_tag: tag,
      cache_hit: false,
      duration_ms: Date.now() - started,
      log: run.log.result('ok'),
      error: null,
    };
  }

  sandboxFor(imageId: string): DockerSandbox {
    return new DockerSandbox(this.docker, imageId, this.cfg, this.runOf.get(imageId));
  }

  /** Tagged images that are not AgenticFix environments: what a Dockerfile can start FROM offline. */
  async localBaseImages(): Promise<string[]> {
    const images = await this.docker.listImages();
    const tags = images.flatMap((i) => i.RepoTags ?? []);
    return [...new Set(tags.filter((t) => t !== '<none>:<none>' && !t.startsWith(`${ENV_REPO}:`)))].sort();
  }

  /**
   * Removes environment images beyond the newest `imageKeep` or older than `imageMaxAgeMs`.
   * `runId` limits it to one run's images; images in use by a container are left alone.
   */
  async gc(opts: { runId?: string; protect?: string; now?: number } = {}): Promise<string[]> {
    const label = [`${LABEL}=1`, ...(opts.runId ? [`${RUN_LABEL}=${opts.runId}`] : [])];
    const images = await this.docker.listImages({ filters: { label } });
    const tagged = images
      .flatMap((i) =>
        (i.RepoTags ?? [])
          .filter((t) => t.startsWith(`${ENV_REPO}:`))
          .map((tag) => ({ tag, id: i.Id, created: Number(i.Labels?.[BUILT_LABEL]) || i.Created * 1000 })),
      )
      .sort((a, b) => b.created - a.created);
    const now = opts.now ?? Date.now();
    const removed: string[] = [];
    // A forced rebuild moves the tag to the new image and leaves the old one dangling.
    for (const img of images.filter((i) => !(i.RepoTags ?? []).some((t) => t !== '<none>:<none>'))) {
      if (img.Id === opts.protect) continue;
      const ok = await this.docker
        .getImage(img.Id)
        .remove()
        .then(() => true)
        .catch(() => false);
      if (ok) removed.push(img.Id);
    }
    for (const [i, img] of tagged.entries()) {
      if (img.id === opts.protect) continue;
      if (i < this.cfg.imageKeep && now - img.created <= this.cfg.imageMaxAgeMs) continue;
      // Removing by tag only untags an image that other environments share.
      const ok = await this.docker
        .getImage(img.tag)
        .remove()
        .then(() => true)
        .catch(() => false);
      if (ok) removed.push(img.tag);
    }
    return removed;
  }

  private async imageId(name: string): Promise<string> {
    const img = await this.docker
      .getImage(name)
      .inspect()
      .catch(() => null);
    return img?.Id ?? `remote:${name}`;
  }

  /**
   * Streams one build; failures come from the stream's error entries, a timeout, the output cap or
   * an abort. Nothing here throws: every failure becomes the result's error.
   */
  private async runBuild(
    opts: BuildOptions,
    snapshot: Awaited<ReturnType<typeof snapshotWorktree>>,
    tag: string,
    key: string,
  ): Promise<{ status: BuildLog['exit_status']; log: BuildLogCompactor; error: string | null }> {
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

    const log = new BuildLogCompactor();
    let error: string | null = null;
    // The classic builder keeps each finished step as an image; after a failure the last one is dangling and unlabelled.
    let lastLayer: string | null = null;
    try {
      const stream = (await this.docker.buildImage(packContext(snapshot, opts.dockerfile), {
        t: tag,
        dockerfile: CONTEXT_DOCKERFILE,
        labels: {
          [LABEL]: '1',
          [RUN_LABEL]: opts.runId,
          [KEY_LABEL]: key,
          [BUILT_LABEL]: String(Date.now()),
        },
        nocache: opts.noCache === true,
        // Builds reach the internet (or the proxy) but not the host or internal networks: see network.ts.
        networkmode: buildNetworkMode(this.cfg.buildNetwork),
        buildargs: proxyBuildArgs(this.cfg.buildNetwork),
        rm: true,
        forcerm: true,
        abortSignal: abort.signal,
      })) as Readable;
      await readProgress(stream, this.cfg.buildMaxOutputBytes, (ev) => {
        if (ev.stream) {
          log.write(ev.stream);
          for (const m of ev.stream.matchAll(/^ ---> ([0-9a-f]{12,64})\s*$/gm)) lastLayer = m[1] ?? null;
        } else if (ev.status) log.write(`${ev.status}\n`);
        const e = ev.error ?? ev.errorDetail?.message;
        if (e) {
          error ??= capped(e);
          log.write(`\nERROR: ${e}\n`); // the newline ends an unterminated output line
        }
      });
    } catch (err) {
      if (err instanceof BuildOutputCap) log.write(`\nERROR: ${err.message}\n`);
      error ??= capped(message(err));
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
    if (timedOut) error = `build timed out after ${this.cfg.buildTimeoutMs} ms`;
    else if (opts.signal?.aborted) error = 'build cancelled';
    if (error !== null) {
      // Stops the engine's build when the stream was given up early (output cap, unreadable entry).
      abort.abort();
      // Removal prunes its untagged parents too; a layer still in use (another build's cache) stays.
      if (lastLayer)
        await this.docker
          .getImage(lastLayer)
          .remove()
          .catch(() => undefined);
    }
    return { status: timedOut ? 'timeout' : error === null ? 'ok' : 'failed', log, error };
  }
}
