import Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { LocalSandbox } from '../environment/local.js';
import type { SandboxFactory } from '../environment/types.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { GitWorkspaceManager } from '../workspace/manager.js';

/**
 * The parts a process's runs share, built in one place for serve, worker, run, verify, eval and the demo,
 * and handed down to the job, the repair, the judge and the start-up: one workspace manager (its
 * in-process queue per mirror orders a run's and its judge's git work without polling the file lock),
 * one image builder (its image leases, renewed by one timer) and one sandbox factory.
 */
export interface Parts {
  workspaces: GitWorkspaceManager;
  images: DockerEnvironmentBuilder;
  sandboxes: SandboxFactory;
}

export function compose(config: Config): Parts {
  // The client only talks to the engine when asked: a local-sandbox process never reaches it.
  const images = new DockerEnvironmentBuilder(new Docker(), config.sandbox);
  const local = new LocalSandbox();
  return {
    workspaces: new GitWorkspaceManager({
      cacheDir: config.cacheDir,
      worktreeDir: config.worktreeDir,
      limits: config.limits,
    }),
    images,
    sandboxes: { local: () => local, container: (imageId, runId) => images.sandboxFor(imageId, runId) },
  };
}
