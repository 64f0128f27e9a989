import { nodeSetupNote } from '../environment/node.js';
import { describeBaseImage, NODE_REPO, runtimeImage } from '../images/base-images.js';
import { CONTAINER_WORKTREE } from '../testrunners/runners.js';
import { createRegistry, DEFAULT_TOOLS, toolsFor } from '../tools/registry.js';
import type { ToolContext, ToolDefinition } from '../tools/types.js';
import { newRunId } from '../trace/ids.js';
import { onBuildStep, progress, type RepairContext } from './repair-context.js';

/**
 * Starts listing the base images the model is told of when it is to write its own Dockerfile: an engine
 * round trip that needs no worktree, so it runs while the worktree is made (the `workspace` step).
 */
export function listBaseImages(c: RepairContext): void {
  if (c.opts.sandbox === 'docker' && !c.opts.dockerfile)
    c.baseImages = c.opts.images.baseImages().catch(() => []);
}

/** The `environment` step: where the tests run, and the tools the model gets for it. */
export async function environmentStep(c: RepairContext): Promise<void> {
  const { opts, config, runId, trace, signal, baseCommit } = c;
  const worktree = c.worktree!;
  const env = await prepareEnvironment(c, worktree.path);
  const { workspaces } = opts;
  c.tools = {
    runId,
    worktree: worktree.path,
    gitDir: worktree.gitDir,
    baseCommit,
    limits: config.limits,
    testCommands: { default: opts.testArgv },
    protectedPaths: opts.protectedPaths ?? [],
    runDir: trace.dir,
    sandbox: env.sandbox,
    environment: env.environment,
    builder: env.builder,
    trace,
    signal,
    onBuildStep: onBuildStep(c),
    onBuilding: (building) => c.phases.start(building ? 'environment' : 'agent'),
    // A fresh worktree of the base commit per call, from the mirror: never a copy of the agent's tree.
    baseTree: async () => {
      const wt = await workspaces.create(opts.remote, baseCommit, `${runId}-base-${newRunId().slice(-8)}`);
      return { path: wt.path, release: () => workspaces.remove(wt) };
    },
  };
  c.registry = createRegistry(c.tools, env.tools);
  c.environmentNote = opts.protectedPaths?.length
    ? `${env.note}\nThese paths are protected and must not change: ${opts.protectedPaths.join(', ')}.`
    : env.note;
}

interface PreparedEnvironment {
  sandbox: ToolContext['sandbox'];
  builder: ToolContext['builder'];
  environment: ToolContext['environment'];
  tools: ToolDefinition[];
  /** One line for the task prompt about where tests run. */
  note: string;
}

/**
 * Local: tests run on the host (trusted repositories only). Docker: a maintainer Dockerfile is built up
 * front; without one the model writes its own with build_environment.
 */
async function prepareEnvironment(c: RepairContext, worktree: string): Promise<PreparedEnvironment> {
  const { opts, runId, trace, signal } = c;
  if (opts.sandbox === 'local') {
    return {
      sandbox: opts.sandboxes.local(),
      builder: null,
      environment: null,
      tools: DEFAULT_TOOLS,
      note: 'The test environment is ready.',
    };
  }
  const builder = opts.images;
  // Facts the model would otherwise learn by failing: where the code is, what the tests can reach.
  const where = `Tests run in a container with the repository mounted at ${CONTAINER_WORKTREE} (the working directory), without network.`;
  if (!opts.dockerfile) {
    // Listed once, for the task and for the tool's description: each listing is an engine round trip.
    const images = await (c.baseImages ?? builder.baseImages().catch(() => []));
    const described = images.map(describeBaseImage);
    const nodeImage = runtimeImage(images, NODE_REPO);
    const node = nodeSetupNote(worktree, { nodeImage, baseImage: opts.config.sandbox.baseImage });
    const note = [
      'There is no test environment yet: first write a Dockerfile for it and call build_environment.',
      `Base images available locally: ${described.join(', ') || '(none)'}; container registries may be unreachable.`,
      where,
      ...(node ? [node] : []),
    ].join('\n');
    return { sandbox: null, builder, environment: null, tools: await toolsFor(builder, described), note };
  }
  progress(c, 'building_environment');
  const built = await builder.build({
    dockerfile: opts.dockerfile,
    worktree,
    runId,
    signal,
    onStep: onBuildStep(c),
  });
  trace.event('environment_built', { ...built });
  if (!built.success || !built.image_id)
    throw new Error(`the maintainer Dockerfile did not build: ${built.error}`);
  trace.writeArtifact('Dockerfile', opts.dockerfile);
  return {
    sandbox: builder.runSandboxFor(built.image_id, runId),
    builder,
    environment: { dockerfile: opts.dockerfile, imageId: built.image_id },
    tools: DEFAULT_TOOLS,
    note: `The test environment is built from the maintainer's Dockerfile. ${where}`,
  };
}
