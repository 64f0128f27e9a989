// Types of leak-environment.mjs (a plain module: jest loads test environments untranspiled).
export const GRACE_MS: number;
export const CONTAINER_GRACE_MS: number;
/** jest-environment-node's environment, with the leak check in its teardown. */
export default class LeakCheckEnvironment {
  constructor(
    config: {
      projectConfig: { testEnvironmentOptions: { containers?: boolean }; globals: object };
      globalConfig: object;
    },
    context: { console: Console; docblockPragmas: object; testPath: string },
  );
  global: typeof globalThis;
  setup(): Promise<void>;
  /** jest-circus's events: the tests that failed are named when the check fails. */
  handleTestEvent(event: { name: string; test?: unknown; hook?: unknown; error?: unknown }): void;
  teardown(): Promise<void>;
}
