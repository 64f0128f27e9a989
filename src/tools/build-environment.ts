import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { NODE_SETUP_HINT } from '../environment/node.js';
import { endOfLifeWarnings } from '../images/build-warnings.js';
import { detectRunner, type Runner } from '../testrunners/runners.js';
import { fail, ok, type ToolContext, type ToolDefinition } from './types.js';

const MAX_DOCKERFILE_CHARS = 20_000;
const STEP_CHARS = 160;

/** Builder bookkeeping the model did not write and cannot act on (its own LABEL steps, layer ids). */
const NOISE =
  /^( ---> |Removing intermediate container |Successfully (built|tagged) |Step \d+\/\d+ : LABEL agenticfix\.)/;

/** A log line as the model should read it: `Step 2/7` counts the builder's LABEL steps, so the total goes. */
const clean = (lines: readonly string[]) =>
  lines.filter((l) => !NOISE.test(l)).map((l) => l.replace(/^Step (\d+)\/\d+ : /, 'Step $1: '));

/** The Dockerfile's instructions, one line each (continuations joined, comments dropped). */
function steps(dockerfile: string): string[] {
  return dockerfile
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => (l.length > STEP_CHARS ? `${l.slice(0, STEP_CHARS)}…` : l));
}

/** What the image provides for the runner of the default test command: the versions the tests will see. */
const NODE = ['node --version', 'npm --version'];
const VERSION_COMMANDS: Record<Runner, readonly string[]> = {
  pytest: ['python3 --version', 'python3 -m pytest --version'],
  jest: [...NODE, 'jest --version'],
  vitest: [...NODE, 'vitest --version'],
  mocha: [...NODE, 'mocha --version'],
  'node-test': NODE,
  go: ['go version'],
  generic: ['python3 --version', 'node --version', 'go version'],
};
const VERSION_TIMEOUT_MS = 30_000;

/**
 * What the version commands answered per image (its id is its content; the runtimes and the tools on
 * its PATH are the image's, the Node recipe's dependencies too): a cached environment of a rerun replies
 * at once, and its container starts with its first test run rather than for this. The most recent
 * KNOWN_IMAGES are kept.
 */
const known = new Map<string, Record<string, string>>();
const KNOWN_IMAGES = 64;

/** Each version command's first line of output in the image (`not found` when it fails), or null when none could run. */
async function runtimeVersions(ctx: ToolContext, imageId: string): Promise<Record<string, string> | null> {
  const commands = VERSION_COMMANDS[detectRunner(ctx.testCommands.default ?? [])];
  // One container for all: `printf` marks where each command's answer starts.
  const script = commands.map((c) => `printf '\\n@@%s\\n' '${c}'; ${c} 2>&1 | head -n 1 || true`).join('; ');
  const key = `${imageId}\n${script}`;
  const seen = known.get(key);
  if (seen) return seen;
  const o = await ctx.sandbox!.run({
    argv: ['/bin/sh', '-c', script],
    worktree: ctx.worktree,
    timeoutMs: VERSION_TIMEOUT_MS,
    maxOutputBytes: 16_384,
    signal: ctx.signal,
  });
  if (o.status !== 'passed') return null;
  const out: Record<string, string> = {};
  for (const chunk of o.stdout.split('\n@@').slice(1)) {
    const [command, ...rest] = chunk.split('\n');
    const answer = rest.join(' ').trim();
    out[command!] = !answer || /not found|No such file|No module named/.test(answer) ? 'not found' : answer;
  }
  known.delete(key);
  known.set(key, out);
  if (known.size > KNOWN_IMAGES) known.delete(known.keys().next().value!);
  return out;
}

const ARGS = z.strictObject({
  dockerfile: z
    .string()
    .min(1)
    .max(MAX_DOCKERFILE_CHARS)
    .describe('Complete Dockerfile text. The build context is a snapshot of the repository (COPY works).'),
});

const describeTool = (baseImages: readonly string[]) =>
  [
    'Build the Docker image that run_tests will use, from a Dockerfile you write. Install the',
    "project's test dependencies (apt, pip, npm…) in RUN steps; do not COPY the whole repository or",
    `run tests in it: the repository is mounted at /workspace when tests run, with no network.`,
    'Builds have network access but no credentials. An identical Dockerfile (and copied files) is',
    'reused without rebuilding. On failure you get the error lines of the build log; fix and retry.',
    NODE_SETUP_HINT,
    baseImages.length > 0
      ? `Container registries may be unreachable; base images available locally: ${baseImages.join(', ')}.`
      : 'Container registries may be unreachable; prefer a base image that exists locally.',
  ].join(' ');

/**
 * Builds the model's environment. On success the run's sandbox becomes a container of that image
 * and the Dockerfile is kept in the run directory (the judge rebuilds it from scratch).
 */
export function makeBuildEnvironmentTool(baseImages: readonly string[] = []): ToolDefinition<typeof ARGS> {
  return {
    name: 'build_environment',
    description: describeTool(baseImages),
    args: ARGS,
    mutates: false,
    async run(ctx, args) {
      if (!ctx.builder) {
        return fail(
          'no_environment',
          'This run has no Docker engine: tests run in the existing sandbox as they are.',
        );
      }
      ctx.onBuilding?.(true);
      const result = await ctx.builder
        .build({
          dockerfile: args.dockerfile,
          worktree: ctx.worktree,
          runId: ctx.runId,
          signal: ctx.signal,
          onStep: ctx.onBuildStep,
        })
        .finally(() => ctx.onBuilding?.(false));
      if (ctx.signal?.aborted) return fail('cancelled', 'build cancelled');
      // For the run's record only: the model is not told about the network's proxy or CA.
      ctx.trace.event('build_network', {
        ...result.network,
        image_id: result.image_id,
        build_status: result.log.exit_status,
        log_tail: result.log.tail,
      });
      const built = {
        image_id: result.image_id,
        image_tag: result.image_tag,
        cache_hit: result.cache_hit,
        duration_ms: result.duration_ms,
      };
      if (!result.success || !result.image_id) {
        const log = result.log;
        const data = {
          ...built,
          log: { ...log, head: clean(log.head), tail: clean(log.tail), error_lines: clean(log.error_lines) },
        };
        if (result.engine_gone)
          return fail(
            'infra_error',
            `the Docker engine went away: ${result.error ?? 'build failed'}`,
            data,
            true,
          );
        return fail('build_failed', result.error ?? 'build failed', data);
      }
      // A new image is a new environment: the next full run measures the suite again (a limit measured in
      // a wrong environment, or under other load, must not bind the runs in this one).
      if (ctx.environment?.imageId !== result.image_id) ctx.suiteMs = null;
      ctx.sandbox = ctx.builder.runSandboxFor(result.image_id, ctx.runId);
      // Success needs no log: what was built, whether from cache, how long it took, and what the tests will
      // run on; first, what the build printed that still matters (a dependency refusing the runtime).
      const runtime = await runtimeVersions(ctx, result.image_id);
      const warnings = [...result.warnings, ...endOfLifeWarnings(runtime ?? {})];
      const data = {
        ...(warnings.length > 0 && { warnings }),
        ...built,
        ...(result.cached_steps.length > 0 && { cached_steps: result.cached_steps }),
        steps: steps(args.dockerfile),
        runtime,
      };
      ctx.environment = { dockerfile: args.dockerfile, imageId: result.image_id };
      await mkdir(ctx.runDir, { recursive: true });
      await writeFile(path.join(ctx.runDir, 'Dockerfile'), args.dockerfile);
      return ok(data);
    },
  };
}
