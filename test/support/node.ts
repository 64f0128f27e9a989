import { cpSync, mkdtempSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeSetupSteps } from '../../src/environment/node.js';
import { git } from '../../src/workspace/git.js';
import { commitAll } from './git-fixtures.js';

/**
 * A Node library (slug.js, CommonJS) whose tests need runners from the npm registry: the same three tests
 * under jest, vitest and mocha, one of them failing at this commit (a trailing dash is not dropped).
 */
export const NODE_FIXTURE = fileURLToPath(new URL('../fixtures/node-runners', import.meta.url));

/** A git repository holding the fixture (plus `extra` files), in a fresh directory under `parent`. */
export async function nodeFixtureRepo(parent: string, extra: (repo: string) => void = () => undefined) {
  const repo = mkdtempSync(path.join(parent, 'node-repo-'));
  cpSync(NODE_FIXTURE, repo, { recursive: true });
  extra(repo);
  await git(['init', '-q', '-b', 'main'], { cwd: repo });
  await commitAll(repo, 'slugger');
  return repo;
}

/** The Dockerfile a model writes following the task text's Node guidance (one text: one cached image). */
export const nodeDockerfile = (baseImage: string) =>
  [`FROM ${baseImage}`, ...nodeSetupSteps(NODE_FIXTURE)!, ''].join('\n');

export const RUNNER_ARGV = {
  jest: ['jest', 'test/jest'],
  vitest: ['vitest', 'run', 'test/vitest'],
  mocha: ['mocha', 'test/mocha'],
} as const;
