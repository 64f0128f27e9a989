/** ESM TypeScript through ts-jest; node runs jest with --experimental-vm-modules. */
import { fileURLToPath } from 'node:url';
import { PROJECTS, misassigned, testFiles } from './test/projects.mjs';

const problems = misassigned(PROJECTS, testFiles(fileURLToPath(new URL('test', import.meta.url))));
if (problems.length) throw new Error(`jest projects (test/projects.mjs):\n  ${problems.join('\n  ')}`);

const common = {
  testEnvironment: 'node',
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

export default {
  projects: Object.keys(PROJECTS).map((name) => ({
    ...common,
    displayName: name,
    testMatch: [`<rootDir>/test/${name}/**/*.test.ts`],
    ...(NEEDS_DIST.has(name) ? { globalSetup: '<rootDir>/test/support/global-setup.mjs' } : {}),
  })),
  testTimeout: 120000,
  testSequencer: '<rootDir>/test/support/sequencer.mjs',
};
