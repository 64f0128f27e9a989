// Types of leak-environment.mjs (a plain module: jest loads test environments untranspiled).
export const GRACE_MS: number;
/** jest-environment-node's environment, with the leak check in its teardown. */
export default class LeakCheckEnvironment {
  constructor(config: unknown, context: { console: Console; docblockPragmas: object; testPath: string });
  global: typeof globalThis;
  setup(): Promise<void>;
  teardown(): Promise<void>;
}
