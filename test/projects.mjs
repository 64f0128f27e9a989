// Which jest project a test belongs to is the folder it sits in: test/<project>/<stage>/<name>.test.ts, where
// <stage> mirrors the folder under src/ it tests (none for src/*.ts). A file goes in the project of the heaviest
// thing it needs: services > docker > cli > app > unit. A test file outside a project folder fails the jest
// run before any test starts.
import { readdirSync } from 'node:fs';
import path from 'node:path';

export const PROJECTS = {
  /** Pure: in-process logic, temp dirs and git at most; no listener, no engine, no dist/. */
  unit: 'in-process logic, temp dirs and git at most',
  /** The app in-process against the GitHub emulator and the scripted model (or a browser); no Docker. */
  app: 'the app in-process against the emulator and the scripted model',
  /** Starts the built CLI (dist/, built once by test/support/global-setup.mjs); no Docker engine. */
  cli: 'the built CLI in other processes',
  /** Needs the Docker engine (some also start dist/). */
  docker: 'the Docker engine',
  /** Needs Redis and/or PostgreSQL (some also Docker and dist/). */
  services: 'Redis and/or PostgreSQL',
};

/**
 * `npm test` runs every suite in two jest invocations (test/support/run-all.mjs): first all of them but these
 * with two workers (most of a suite's time is spent waiting on containers, child processes and timers, so
 * two at once nearly halve the run on two CPUs), then these one at a time. A suite belongs here when another
 * suite of the same run beside it would change what it proves: it bounds a duration tightly, it expects
 * engine-wide state that a neighbour also changes, or it measures something a neighbour moves. Each entry
 * says why.
 */
export const ALONE = {
  // A container or lease whose owner process is gone is removed by whichever sweep of the engine comes
  // first, and every app start-up sweeps: these two check that their own sweep removed one.
  'docker/pipeline/leftovers':
    'expects its sweep to remove a dead child’s container (failed once beside other suites: a neighbour’s sweep took it first)',
  'docker/pipeline/faults': 'expects its engine sweep to clear a dead holder’s image lease',
  'services/store/store-outage':
    'its worker holds a BullMQ lock of 2 s through a PostgreSQL outage of seconds: a busy neighbour can stall the lock and change the outcome',
  'docker/pipeline/faults-engine':
    "cuts the engine 500 ms after the tests' container starts, and checks what the run left behind",
};

/** Test files (paths under test/, without `.test.ts`) found on disk. */
export function testFiles(dir) {
  return readdirSync(dir, { recursive: true })
    .map((f) => String(f).split(path.sep).join('/'))
    .filter((f) => f.endsWith('.test.ts') && !f.split('/').includes('fixtures'))
    .map((f) => f.slice(0, -'.test.ts'.length))
    .sort();
}

/** What is wrong with where `files` sit: each one under a project's folder. */
export function misassigned(projects, files) {
  return files
    .filter((f) => !(f.split('/')[0] in projects) || f.split('/').length < 2)
    .map(
      (f) => `test/${f}.test.ts is in no project: move it under test/<${Object.keys(projects).join('|')}>/`,
    );
}
