/**
 * The one way a test skips for want of something on the machine (the Docker engine, a service, a browser).
 * The test module decides at its top (`const engine = await needDocker();`) and declares its tests with
 * `describeIf(engine)` / `itIf(engine)`: jest then reports them as skipped, never as passed, and one loud
 * line names what was skipped and why. In CI (CI set) the need* functions throw instead of returning a
 * missing need, so nothing that CI provides is ever skipped there.
 */
export interface Need {
  /** What the tests need, e.g. "the Docker engine". */
  readonly what: string;
  /** Why it is not there, or null when it is. */
  readonly missing: string | null;
  /** Whether it is there (for a cleanup that only applies then). */
  readonly ok: boolean;
}

/** `what`, missing for `why`; in CI a failure (CI provides it, so its absence is a broken setup). */
export function missing(what: string, why: string, inCi: 'throw' | 'skip' = 'throw'): Need {
  if (process.env.CI && inCi === 'throw') throw new Error(`${what} required in CI but missing: ${why}`);
  return { what, missing: why, ok: false };
}

export const present = (what: string): Need => ({ what, missing: null, ok: true });

/** All of `needs` at once: missing when any is. */
export function needAll(...needs: Need[]): Need {
  const gone = needs.filter((n) => n.missing !== null);
  return {
    what: needs.map((n) => n.what).join(' and '),
    missing: gone.length ? gone.map((n) => `${n.what}: ${n.missing}`).join('; ') : null,
    ok: gone.length === 0,
  };
}

function announce(kind: string, title: string, need: Need): void {
  console.warn(`\n!!! SKIPPED ${kind} "${title}": it needs ${need.what} (${need.missing}) !!!\n`);
}

/** `describe` when `need` is met, else `describe.skip` with a line saying what was skipped and why. */
export function describeIf(need: Need): (title: string, fn: () => void) => void {
  if (need.ok) return describe;
  return (title, fn) => {
    announce('suite', title, need);
    describe.skip(title, fn);
  };
}

/** `it` when `need` is met, else `it.skip` with a line saying what was skipped and why. */
export function itIf(need: Need): (title: string, fn?: jest.ProvidesCallback, timeout?: number) => void {
  if (need.ok) return it;
  return (title, fn, timeout) => {
    announce('test', title, need);
    it.skip(title, fn, timeout);
  };
}
