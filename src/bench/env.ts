import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { dockerAvailable } from '../environment/docker.js';
import { APT_NODE, nodeRecipe } from '../environment/node.js';
import { NODE_REPO, runtimeImage } from '../images/base-images.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { benchConfig, generatedProject } from './suites.js';
import type { BenchOptions } from './options.js';

function emptyProject(parent: string): string {
  const dir = mkdtempSync(path.join(parent, 'empty-'));
  const pkg = { name: 'empty', version: '1.0.0' };
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg));
  const lock = { ...pkg, lockfileVersion: 3, requires: true, packages: { '': pkg } };
  writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(lock));
  return dir;
}

/**
 * Issue 40: the time to build a Node project's environment with the recipe the model is offered, on a
 * cold engine (no cached layers but the base images: each build is `--no-cache` with a context of its
 * own), and the share of it spent installing the runtime (the steps that install node, timed from the
 * engine's step lines). Without `--smoke` the same project is also built the way the task text said
 * before the language images, with Debian's node and npm from apt, for comparison.
 */
export async function benchEnv({ smoke }: BenchOptions): Promise<Record<string, number | string>> {
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { skipped: 'no Docker engine reachable' };
  const tmp = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-env-'));
  const config = benchConfig(tmp);
  const builder = new DockerEnvironmentBuilder(docker, config.sandbox);
  const runId = `bench-env-${Date.now()}`;
  const tags: string[] = [];
  try {
    // jest, vitest and mocha from their lockfile; `--smoke`: a project without dependencies (seconds).
    const project = smoke ? emptyProject(tmp) : generatedProject(tmp, 10, 10);
    // A context of its own: nothing of an earlier build matches it.
    writeFileSync(path.join(project, 'bench-run.txt'), runId);
    const nodeImage = runtimeImage(await builder.baseImages(), NODE_REPO);
    const baseImage = config.sandbox.baseImage;
    const build = async (name: string, recipe: string[]) => {
      const starts: { step: string; at: number }[] = [];
      const t0 = Date.now();
      const built = await builder.build({
        dockerfile: [...recipe, ''].join('\n'),
        worktree: project,
        runId,
        noCache: true,
        onStep: (step) => starts.push({ step, at: Date.now() }),
      });
      if (!built.success || !built.image_tag) throw new Error(`${name}: the build failed: ${built.error}`);
      tags.push(built.image_tag);
      const end = t0 + built.duration_ms;
      // A step lasts until the next one starts; the last until the build ends.
      const runtimeMs = starts.reduce(
        (sum, s, i) => sum + (s.step.includes(APT_NODE.slice(4)) ? (starts[i + 1]?.at ?? end) - s.at : 0),
        0,
      );
      return {
        [`${name}_build_ms`]: built.duration_ms,
        [`${name}_runtime_install_ms`]: runtimeMs,
        [`${name}_runtime_share`]: Number((runtimeMs / built.duration_ms).toFixed(3)),
      };
    };
    const out: Record<string, number | string> = {
      runtime_image: nodeImage ? `${nodeImage.tag} (${nodeImage.runtime})` : 'none: the recipe uses apt',
      ...(await build('offered', nodeRecipe(project, { nodeImage, baseImage })!)),
    };
    if (!smoke && nodeImage)
      Object.assign(out, await build('apt', nodeRecipe(project, { nodeImage: null, baseImage })!));
    return out;
  } finally {
    for (const tag of tags) await builder.removeImage(tag);
    await builder.release(runId).catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  }
}
