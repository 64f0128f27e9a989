import type Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { compactBuildLog, splitLogLines } from './buildlog.js';
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

/** One entry of the Engine's build progress stream. */
interface BuildEvent {
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string };
}

/** Build errors that mean a base image could not be pulled: the model should pick a local one. */
const PULL_FAILURE =
  /pull access denied|manifest unknown|repository does not exist|no such host|dial tcp|i\/o timeout|TLS handshake|connection refused|toomanyrequests/i;

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

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
      snapshot = await snapshotWorktree(opts.worktree);
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
      const log = compactBuildLog(run.lines, run.status);
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
      return failed('the build finished but produced no image', compactBuildLog(run.lines, 'failed'));
    }
    this.runOf.set(image.Id, opts.runId);
    await this.gc({ protect: image.Id }).catch(() => undefined);
    return {
      success: true,
      image_id: image.Id,
      image_tag: tag,
      cache_hit: false,
      duration_ms: Date.now() - started,
      log: compactBuildLog(run.lines, 'ok'),
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

  /** Streams one build; failures come from the stream's error entries, a timeout or an abort. */
  private async runBuild(
    opts: BuildOptions,
    snapshot: Awaited<ReturnType<typeof snapshotWorktree>>,
    tag: string,
    key: string,
  ): Promise<{ status: BuildLog['exit_status']; lines: string[]; error: string | null }> {
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, this.cfg.buildTimeoutMs);
    const onAbort = () => abort.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.signal?.aborted) abort.abort();

    let raw = '';
    let error: string | null = null;
    // The classic builder keeps each finished step as an image; after a failure the last one is dangling and unlabelled.
    let lastLayer: string | null = null;
    try {
      const stream = await this.docker.buildImage(packContext(snapshot, opts.dockerfile), {
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
      });
      await new Promise<void>((resolve, reject) => {
        this.docker.modem.followProgress(
          stream,
          (err: Error | null) => (err ? reject(err) : resolve()),
          (ev: BuildEvent) => {
            if (ev.stream) {
              raw += ev.stream;
              for (const m of ev.stream.matchAll(/^ ---> ([0-9a-f]{12,64})\s*$/gm)) lastLayer = m[1] ?? null;
            } else if (ev.status) raw += `${ev.status}\n`;
            const e = ev.error ?? ev.errorDetail?.message;
            if (e) {
              error ??= e;
              raw += `ERROR: ${e}\n`;
            }
          },
        );
      });
    } catch (err) {
      error ??= abort.signal.aborted
        ? timedOut
          ? `build timed out after ${this.cfg.buildTimeoutMs} ms`
          : 'build cancelled'
        : message(err);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
    const lines = splitLogLines(raw);
    // Removal prunes its untagged parents too; a layer still in use (another build's cache) stays.
    if ((abort.signal.aborted || error !== null) && lastLayer)
      await this.docker
        .getImage(lastLayer)
        .remove()
        .catch(() => undefined);
    if (timedOut)
      return { status: 'timeout', lines, error: `build timed out after ${this.cfg.buildTimeoutMs} ms` };
    if (abort.signal.aborted) return { status: 'failed', lines, error: 'build cancelled' };
    return { status: error === null ? 'ok' : 'failed', lines, error };
  }
}
