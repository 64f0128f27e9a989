import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { ImageLeases } from '../../../src/images/leases.js';
import type { ScriptStep } from '../../../src/emulator/scripted-model.js';
import type { RepairOptions } from '../../../src/pipeline/types.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { call, repairFixture, type RepairFixture } from '../../support/repair.js';
import { describeIf } from '../../support/skip.js';
import { fileVersion } from '../../../src/tools/files.js';

const FIXTURE = fileURLToPath(new URL('../../fixtures/agent-repo', import.meta.url));
const VERSION = fileVersion(readFileSync(path.join(FIXTURE, 'src/math.js')));
// The base image has no node: a shell check stands in for the test suite, inside the container.
const TEST_ARGV = ['sh', '-c', 'grep -q "return a + b" src/math.js && echo fixed'];
const DOCKERFILE = `FROM ${BASE_IMAGE}\nWORKDIR /workspace\n`;
const EDIT = call('edit_file', {
  path: 'src/math.js',
  old_text: 'return a - b;',
  new_text: 'return a + b;',
  version: VERSION,
});
const FINISH = call('finish', { summary: 'add() now adds' });
let fixture: RepairFixture;

beforeAll(async () => {
  fixture = await repairFixture('agenticfix-repair-docker-', FIXTURE);
});
afterAll(() => fixture.cleanup());

const repair = (script: ScriptStep[], more: Partial<RepairOptions> = {}) =>
  fixture.repair(fixture.config(), script, { testArgv: TEST_ARGV, ...more });

const engine = await needDocker();
describeIf(engine)('runRepair in the Docker sandbox', () => {
  it('without a maintainer Dockerfile the model builds its environment, then tests run in it', async () => {
    const { result, requests } = await repair([
      call('run_tests'),
      call('build_environment', { dockerfile: DOCKERFILE }),
      EDIT,
      call('run_tests'),
      FINISH,
    ]);
    expect(result.stop_reason).toBe('completed');
    const tools = (requests[0]!.body as { tools: { function: { name: string } }[] }).tools.map(
      (t) => t.function.name,
    );
    expect(tools.filter((n) => n === 'build_environment')).toHaveLength(1);
    expect(JSON.stringify(requests[1]!.body)).toContain('no_environment');
    expect(result.dockerfile).toBe(DOCKERFILE);
    expect(result.image_id).toMatch(/^sha256:/);
    expect(result.last_test).toMatchObject({ status: 'passed', stdout: 'fixed\n' });
  });

  it('a maintainer Dockerfile is built up front and build_environment is not offered', async () => {
    const { result, requests } = await repair([EDIT, call('run_tests'), FINISH], { dockerfile: DOCKERFILE });
    expect(result.stop_reason).toBe('completed');
    const tools = (requests[0]!.body as { tools: { function: { name: string } }[] }).tools.map(
      (t) => t.function.name,
    );
    expect(tools).not.toContain('build_environment');
    expect(result.dockerfile).toBe(DOCKERFILE);
    expect(result.last_test?.status).toBe('passed');
    const recorded = JSON.parse(readFileSync(result.result_path, 'utf8')) as {
      artifacts: { name: string }[];
    };
    expect(recorded.artifacts.map((a) => a.name)).toEqual(['final.patch', 'Dockerfile']);
  });

  it('the image is leased while the run uses it and released when the run ends, also when cancelled', async () => {
    const docker = new Docker();
    const runId = `lease-repair-${process.pid}-${Date.now()}`;
    const leased = async () =>
      (await ImageLeases.list(docker, 30_000)).filter((l) => l.run === runId).map((l) => l.image);
    const abort = new AbortController();
    let during: Promise<string[]> | null = null;
    const { result } = await repair(
      [call('build_environment', { dockerfile: DOCKERFILE }), ...Array(6).fill(call('run_tests')), FINISH],
      {
        runId,
        signal: abort.signal,
        // After the build and one test run, look at the engine, then cancel the run.
        onProgress: (p) => {
          if (p.phase === 'working' && p.step === 2 && !during)
            during = leased().finally(() => abort.abort());
        },
      },
    );
    expect(result.stop_reason).toBe('cancelled');
    expect(await during).toEqual([result.image_id]);
    expect(await leased()).toEqual([]);
  });
});
