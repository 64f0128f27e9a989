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
/** A project without dependencies gets no node_modules from its install: the links need one. */
const ENSURE_DIR = 'mkdir -p node_modules';
const PATH_ENV = `ENV PATH=${NODE_DEPS_DIR}/node_modules/.bin:$PATH`;

/** One sentence for build_environment's description. */
export const NODE_SETUP_HINT =
  `Node projects: start FROM the local Node.js image when there is one (node and npm without apt), copy ` +
  `package.json and the lockfile to ${NODE_DEPS_DIR} and install there before anything else (an unchanged ` +
  `lockfile then reuses the installed layer), after \`${NO_ROOT_SCRIPTS}\` (the root package's ` +
  `prepare/build scripts must not run there), then \`${LINK}\`, \`${VITE_TEMP}\` and \`${PATH_ENV}\`; ` +
  `tests at /workspace resolve packages and runner binaries from there.`;

/** Debian's node and npm, for a machine without the local Node.js image (slow: minutes on a cold engine). */
export const APT_NODE =
  'RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*';

/** Where the recipe's node comes from: the local Node.js image, else Debian's on the base image. */
export interface NodeRuntime {
  /** The local Node.js image and its runtime's version (`Node.js 22.23.5`). */
  nodeImage: { tag: string; runtime: string | null } | null;
  baseImage: string;
}

/** A regular file at the worktree's root (links are not followed: the worktree is untrusted). */
const isFile = (worktree: string, name: string) =>
  lstatSync(path.join(worktree, name), { throwIfNoEntry: false })?.isFile() ?? false;

/**
 * The Dockerfile for the project at `worktree` (from its FROM line), or null when it is no Node project.
 * The manifest and lockfile are copied and installed before anything else, so the engine's layer cache
 * keys the installed dependencies by their content: a later build with the same lockfile (another
 * commit, another run of the repository) reuses that layer.
 */
export function nodeRecipe(worktree: string, runtime: NodeRuntime): string[] | null {
  if (!isFile(worktree, 'package.json')) return null;
  const [lockfile, install] = INSTALL.find(([f]) => isFile(worktree, f)) ?? [null, 'npm install'];
  return [
    ...(runtime.nodeImage ? [`FROM ${runtime.nodeImage.tag}`] : [`FROM ${runtime.baseImage}`, APT_NODE]),
    `WORKDIR ${NODE_DEPS_DIR}`,
    `COPY ${['package.json', ...(lockfile ? [lockfile] : [])].join(' ')} ./`,
    `RUN ${NO_ROOT_SCRIPTS} && ${install} && ${ENSURE_DIR} && ${LINK} && ${VITE_TEMP}`,
    PATH_ENV,
    'WORKDIR /workspace',
  ];
}

/** The task text's paragraph for a Node project, or null. */
export function nodeSetupNote(worktree: string, runtime: NodeRuntime): string | null {
  const recipe = nodeRecipe(worktree, runtime);
  if (!recipe) return null;
  const source = runtime.nodeImage
    ? `${runtime.nodeImage.tag} has ${runtime.nodeImage.runtime ?? 'Node.js'} and npm, so node needs no apt; add apt packages only for native addons (node-gyp: python3 make g++)`
    : 'no local Node.js image is here, so this takes node and npm from Debian (slow, and an old Node.js)';
  return [
    'This is a Node project. Install its dependencies in the image, never in the mounted repository, with',
    `a Dockerfile like this one (${source}):`,
    ...recipe.map((s) => `    ${s}`),
    'Keep package.json and the lockfile copied and installed before other steps: an unchanged lockfile reuses the installed layer from cache.',
    'Node resolves packages from /workspace up to /node_modules, so imports and runner binaries work at test time.',
    `Tests run as an unprivileged user on a read-only root: only /workspace and /tmp are writable (${WRITABLE_ENV.join(', ')}).`,
  ].join('\n');
}
