import { lstatSync } from 'node:fs';
import path from 'node:path';
import { WRITABLE_ENV } from './docker.js';

/**
 * How a Node project's dependencies reach its tests (src/environment/README.md, "Node projects"): they
 * are installed in the image from the lockfile under /deps, and /node_modules links there. Node's
 * resolution (require and import alike, and the runners' own resolvers) walks from /workspace up to
 * /node_modules, so the mounted repository finds them without network and without anything written
 * into the worktree. The one place that says so, for the tool description and the task text.
 */
export const NODE_DEPS_DIR = '/deps';

/** The lockfiles we know, first match wins, with the install command that honours each one. */
const INSTALL: [lockfile: string, install: string][] = [
  ['package-lock.json', 'npm ci'],
  ['npm-shrinkwrap.json', 'npm ci'],
  ['pnpm-lock.yaml', 'npm install -g pnpm && pnpm install --frozen-lockfile'],
  ['yarn.lock', 'npm install -g yarn && yarn install --frozen-lockfile'],
];

const LINK = `ln -s ${NODE_DEPS_DIR}/node_modules /node_modules`;
/**
 * vite (and so vitest) bundles its config into `.vite-temp` in the nearest node_modules, which is
 * /node_modules on the read-only root: pointed at /tmp, the file lands where tests may write and its
 * imports still resolve up to /node_modules.
 */
const VITE_TEMP = `ln -s /tmp ${NODE_DEPS_DIR}/node_modules/.vite-temp`;
/** The root package's own scripts (prepare, a build) are the repository's, not its dependencies': never run in /deps. */
const NO_ROOT_SCRIPTS = 'npm pkg delete scripts';
const PATH_ENV = `ENV PATH=${NODE_DEPS_DIR}/node_modules/.bin:$PATH`;

/** One sentence for build_environment's description. */
export const NODE_SETUP_HINT =
  `Node projects: install the dependencies in the image from the lockfile under ${NODE_DEPS_DIR} (after ` +
  `\`${NO_ROOT_SCRIPTS}\`: the root package's prepare/build scripts must not run there), then \`${LINK}\`, ` +
  `\`${VITE_TEMP}\` and \`${PATH_ENV}\`; tests at /workspace resolve packages and runner binaries from there.`;

/** A regular file at the worktree's root (links are not followed: the worktree is untrusted). */
const isFile = (worktree: string, name: string) =>
  lstatSync(path.join(worktree, name), { throwIfNoEntry: false })?.isFile() ?? false;

/** The Dockerfile steps for the project at `worktree`, or null when it is no Node project. */
export function nodeSetupSteps(worktree: string): string[] | null {
  if (!isFile(worktree, 'package.json')) return null;
  const [lockfile, install] = INSTALL.find(([f]) => isFile(worktree, f)) ?? [null, 'npm install'];
  return [
    'RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*',
    `WORKDIR ${NODE_DEPS_DIR}`,
    `COPY ${['package.json', ...(lockfile ? [lockfile] : [])].join(' ')} ./`,
    `RUN ${NO_ROOT_SCRIPTS} && ${install} && ${LINK} && ${VITE_TEMP}`,
    PATH_ENV,
    'WORKDIR /workspace',
  ];
}

/** The task text's paragraph for a Node project, or null. */
export function nodeSetupNote(worktree: string): string | null {
  const steps = nodeSetupSteps(worktree);
  if (!steps) return null;
  return [
    'This is a Node project. Install its dependencies in the image, never in the mounted repository, with',
    'steps like these after FROM (any base image with node works; these take node and npm from Debian):',
    ...steps.map((s) => `    ${s}`),
    'Node resolves packages from /workspace up to /node_modules, so imports and runner binaries work at test time.',
    `Tests run as an unprivileged user on a read-only root: only /workspace and /tmp are writable (${WRITABLE_ENV.join(', ')}).`,
  ].join('\n');
}
