/** ESM TypeScript through ts-jest; node runs jest with --experimental-vm-modules. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // dist/ built once, when stale, for the suites that start the built CLI in other processes.
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  setupFiles: ['<rootDir>/test/support/jest-setup.cjs'],
  // Every GitHub emulator is checked against GitHub's published description as it closes.
  setupFilesAfterEnv: ['<rootDir>/test/support/contract-setup.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testTimeout: 120000,
};
