import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import type { EnvironmentBuilder } from '../../src/environment/types.js';
import type { ToolContext } from '../../src/tools/types.js';
import { RunTrace } from '../../src/trace/trace.js';

/** A tool context for calling build_environment directly: a fresh run directory under `parent`, no environment yet. */
export function buildToolContext(opts: {
  runId: string;
  worktree: string;
  parent: string;
  builder: EnvironmentBuilder;
  testCommand: string[];
}): ToolContext {
  const runDir = mkdtempSync(path.join(opts.parent, 'run-'));
  return {
    runId: opts.runId,
    worktree: opts.worktree,
    gitDir: path.join(opts.worktree, '.git'),
    baseCommit: 'HEAD',
    limits: loadConfig({}).limits,
    testCommands: { default: opts.testCommand },
    runDir,
    sandbox: null,
    environment: null,
    builder: opts.builder,
    trace: new RunTrace(opts.runId, runDir),
  };
}
