/** ESM TypeScript through ts-jest; node runs jest with --experimental-vm-modules. */
import { fileURLToPath } from 'node:url';
import { PROJECTS, misassigned, testFiles } from './test/projects.mjs';

const problems = misassigned(PROJECTS, testFiles(fileURLToPath(new URL('test', import.meta.url))));
if (problems.length) throw new Error(`jest projects (test/projects.mjs):\n  ${problems.join('\n  ')}`);

const common = {
  // A suite that leaves a server, socket, child process or timer running fails, naming it.
  testEnvironment: '<rootDir>/test/support/leak-environment.mjs',
  extensionsToTreatAsEsm: ['.ts'],
  setupFiles: ['<rootDir>/test/support/jest-setup.cjs'],
  // Every GitHub emulator is checked against GitHub's published description as it closes.
  setupFilesAfterEnv: ['<rootDir>/test/support/contract-setup.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
};

// dist/ built once, when stale, for the projects whose suites start the built CLI in other processes
// (a project's globalSetup runs only when one of its tests runs: `test:fast` never builds).
const NEEDS_DIST = new Set(['cli', 'docker', 'services']);
// The projects whose suites start containers: one the app labelled and the suite left behind fails it too.
const USES_ENGINE = new Set(['docker', 'services']);

export default {
  projects: Object.keys(PROJECTS).map((name) => ({
    ...common,
    displayName: name,
    testMatch: [`<rootDir>/test/${name}/**/*.test.ts`],
    ...(NEEDS_DIST.has(name) ? { globalSetup: '<rootDir>/test/support/global-setup.mjs' } : {}),
    ...(USES_ENGINE.has(name) ? { testEnvironmentOptions: { containers: true } } : {}),
  })),
  testTimeout: 120000,
  // Suites leave what they loaded behind in their worker (jest's module registries; the GitHub
  // description each emulator's check parses): after five app suites a worker held 470-630 MB of heap.
  // Its exit then took longer than the 500 ms jest waits on a busy machine, and jest force-exited it
  // ("A worker process has failed to exit gracefully"; its 'exit' event came 0 ms after jest asked it
  // to end: nothing kept it alive). A worker past this much heap after a suite is replaced.
  workerIdleMemoryLimit: '400MB',
  testSequencer: '<rootDir>/test/support/sequencer.mjs',
};
