import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import type { Config } from '../../../src/config/config.js';
import { DockerSandbox } from '../../../src/environment/docker.js';
import { CellInfraError, runCell } from '../../../src/verify/cells.js';
import { infraReason } from '../../../src/verify/judge.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { call, observation, repairFixture, type RepairFixture } from '../../support/repair.js';
import { describeIf } from '../../support/skip.js';

let fixture: RepairFixture;
let repo: string;
let config: Config;
const docker = new Docker();

beforeAll(async () => {
  fixture = await repairFixture('agenticfix-heal-', { 'check.sh': 'test -f /heal-marker && echo healthy\n' });
  repo = fixture.repo;
  config = fixture.config();
});
afterAll(() => fixture.cleanup());

const engine = await needDocker();
describeIf(engine)('a sandbox whose image disappeared', () => {
  it('is rebuilt from the recorded Dockerfile before the next run, and the model is told so', async () => {
    // A Dockerfile of its own, so the image removed below is this test's alone.
    const dockerfile = `FROM ${BASE_IMAGE}\nRUN echo ${randomUUID()} > /heal-marker\n`;
    let built: string | null = null;
    const { result, requests } = await fixture.repair(
      config,
      [
        call('build_environment', { dockerfile }, 'b'),
        call('run_tests', {}, 't1'),
        call('run_tests', {}, 't2'),
        call('run_command', { argv: ['sh', 'check.sh'] }, 'c'),
        call('create_file', { path: 'NOTE.md', content: 'checked\n' }, 'n'),
        call('finish', { summary: 'checked' }, 'f'),
      ],
      {
        testArgv: ['sh', 'check.sh'],
        server: {
          // Before the model's second test run is answered, the engine loses the image (as after a restart
          // or a cleanup by another process); forced, because the run's lease is what such events ignore.
          // The image id is read while the build's observation is the newest (whole, not yet compacted).
          onRequest: async (i, body) => {
            if (i === 1) built = JSON.parse(observation([{ body }], 'b')).data.image_id as string;
            if (i === 2) {
              // The run's warm container keeps its image from being removed (the engine refuses, even
              // forced): the image goes with its container, as in an engine restart followed by a prune.
              const users = await docker.listContainers({ all: true, filters: { ancestor: [built!] } });
              for (const c of users) await docker.getContainer(c.Id).remove({ force: true });
              await docker.getImage(built!).remove({ force: true });
            }
          },
        },
      },
    );
    expect({ stop: result.stop_reason, error: result.error }).toEqual({ stop: 'completed', error: null });
    expect(built).toMatch(/^sha256:/);
    await expect(docker.getImage(built!).inspect()).rejects.toMatchObject({ statusCode: 404 });
    const seen = (id: string) => observation(requests, id);
    expect(JSON.parse(seen('t1')).data).toMatchObject({ status: 'passed' });
    expect(JSON.parse(seen('t1')).data.environment_rebuilt).toBeUndefined();
    const t2 = seen('t2');
    expect(t2).not.toMatch(/No such image|no such container/i);
    const healed = JSON.parse(t2);
    expect(healed).toMatchObject({ success: true, data: { status: 'passed', exit_code: 0 } });
    expect(healed.data.environment_rebuilt).toMatchObject({
      reason: expect.stringMatching(/removed .*rebuilt from your Dockerfile/),
      image_id: expect.stringMatching(/^sha256:/),
      cache_hit: false,
    });
    expect(healed.data.stdout).toContain('healthy');
    // Later calls use the rebuilt image without another build.
    const c = JSON.parse(seen('c'));
    expect(c.data).toMatchObject({ status: 'passed', stdout: 'healthy\n' });
    expect(c.data.environment_rebuilt).toBeUndefined();

    const events = readFileSync(path.join(result.run_dir, 'events.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; lost_image_id?: string; success?: boolean });
    const rebuilt = events.filter((e) => e.type === 'environment_rebuilt');
    expect(rebuilt).toHaveLength(1);
    expect(rebuilt[0]).toMatchObject({ lost_image_id: built, success: true });
    await docker
      .getImage(healed.data.environment_rebuilt.image_id)
      .remove({ force: true })
      .catch(() => undefined);
  }, 240_000);

  it("the judge's lost image is an infra_error with a plain reason, not the engine's message", async () => {
    const gone = new DockerSandbox(docker, `sha256:${'0'.repeat(64)}`, config.sandbox);
    expect(await gone.available()).toBe(false);
    const err = await runCell(
      { name: 'base', source: 'base', tests: 'base' },
      {
        sandbox: gone,
        worktree: repo,
        argv: ['sh', 'check.sh'],
        timeoutMs: 10_000,
        maxOutputBytes: 10_000,
        maxReportBytes: 10_000,
        reruns: 0,
        allowEmpty: true,
      },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CellInfraError);
    expect(infraReason(err)).toBe(
      "The judge could not run the tests: the judge's test image was removed while it ran (engine restart or cleanup); run the verification again.",
    );
  });
});
