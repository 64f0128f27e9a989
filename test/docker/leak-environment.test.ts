import { spawn } from 'node:child_process';
import { once } from 'node:events';
import Docker from 'dockerode';
import { containerLabels, OWNER_LABEL, RUN_LABEL } from '../../src/environment/containers.js';
import { processOwner } from '../../src/environment/lending.js';
import { BASE_IMAGE, needDocker } from '../support/docker.js';
import LeakCheckEnvironment from '../support/leak-environment.mjs';
import { describeIf } from '../support/skip.js';

const engine = await needDocker();
const docker = new Docker();
const runId = `leak-check-${process.pid}`;

/** The environment of the docker and services projects (jest.config.js): it checks containers too. */
const environment = () =>
  new LeakCheckEnvironment(
    { projectConfig: { testEnvironmentOptions: { containers: true }, globals: {} }, globalConfig: {} },
    { console, docblockPragmas: {}, testPath: 'a.test.ts' },
  );

/** A container labelled as the app labels its own (never started: the check lists stopped ones too). */
const labelled = (labels: Record<string, string>) =>
  docker.createContainer({ Image: BASE_IMAGE, Cmd: ['true'], Labels: labels });

const exists = (id: string) =>
  docker
    .getContainer(id)
    .inspect()
    .then(
      () => true,
      () => false,
    );

afterAll(async () => {
  if (!engine.ok) return;
  for (const c of await docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${runId}`] } }))
    await docker.getContainer(c.Id).remove({ force: true });
});

describeIf(engine)(
  'the leak check of the suites that use the engine (test/support/leak-environment.mjs)',
  () => {
    it("fails a suite that leaves an app's container of its own or of a process it started, and removes them", async () => {
      const env = environment();
      await env.setup();
      const own = await labelled(containerLabels(runId, Date.now() + 60_000));
      // The built CLI started by a suite labels its containers with its own pid.
      const child = spawn('sleep', ['30']);
      const started = await labelled({
        ...containerLabels(runId, Date.now() + 60_000),
        [OWNER_LABEL]: processOwner(child.pid),
      });
      try {
        const error = await env.teardown().then(
          () => null,
          (e: Error) => e.message,
        );
        expect(error).toMatch(/the suite left 2 of the app's containers/);
        for (const c of [own, started]) expect(error).toContain(c.id.slice(0, 12));
        expect([await exists(own.id), await exists(started.id)]).toEqual([false, false]);
      } finally {
        child.kill();
        await once(child, 'exit');
      }
    });

    it('leaves alone the containers of other processes, and passes a suite that removed its own', async () => {
      const env = environment();
      await env.setup();
      // Another process's (a neighbour suite's, pid 1 stands for it), and one removed before the end.
      const other = await labelled({
        ...containerLabels(runId, Date.now() + 60_000),
        [OWNER_LABEL]: processOwner(1),
      });
      const removed = await labelled(containerLabels(runId, Date.now() + 60_000));
      await removed.remove();
      await expect(env.teardown()).resolves.toBeUndefined();
      expect(await exists(other.id)).toBe(true);
    });
  },
);
