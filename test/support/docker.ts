import Docker from 'dockerode';

/**
 * Whether Docker-backed tests can run. In CI a missing engine is a failure, never a silent skip;
 * elsewhere the suite is skipped with a loud warning.
 */
export async function dockerReady(): Promise<boolean> {
  try {
    await new Docker().ping();
    return true;
  } catch (err) {
    if (process.env.CI) throw new Error(`Docker engine required in CI but not reachable: ${String(err)}`);
    console.warn(`\n!!! Docker engine not reachable: SKIPPING Docker tests (${String(err)}) !!!\n`);
    return false;
  }
}

export const BASE_IMAGE = process.env.AGENTICFIX_BASE_IMAGE ?? 'agenticfix/debian:bookworm';
