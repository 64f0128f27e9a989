import { cpSync, mkdtempSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeRecipe } from '../../src/environment/node.js';
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

/** The local Node.js language image scripts/setup-docker.sh builds (scripts/node-image.sh). */
export const NODE_IMAGE = process.env.AGENTICFIX_NODE_IMAGE ?? 'agenticfix/node:22';

/**
 * The Dockerfile a model writes following the task text's Node guidance (one text: one cached image): FROM
 * the local Node.js image (`baseImage` is the fallback's, for a machine without it: the task text then says
 * apt).
 */
export const nodeDockerfile = (baseImage: string) =>
  [...nodeRecipe(NODE_FIXTURE, { nodeImage: { tag: NODE_IMAGE, runtime: null }, baseImage })!, ''].join('\n');

export const RUNNER_ARGV = {
  jest: ['jest', 'test/jest'],
  vitest: ['vitest', 'run', 'test/vitest'],
  mocha: ['mocha', 'test/mocha'],
} as const;
