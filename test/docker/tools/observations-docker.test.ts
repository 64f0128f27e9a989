import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { call, observation, repairFixture, type RepairFixture } from '../../support/repair.js';
import { describeIf } from '../../support/skip.js';
import { fileVersion } from '../../../src/tools/files.js';

// Python and pytest from a RUN step of its own: the build observation lists both steps.
const DOCKERFILE = `FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest && rm -rf /var/lib/apt/lists/*
`;
const CALC = 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n';
const PASSING = 330;
/** A suite of 332 tests, two of them failing because add() subtracts; -v -rA prints every pass twice. */
const SUITE = [
  'from calc import add, mul',
  '',
  ...Array.from({ length: PASSING }, (_, i) => `def test_mul_${i}():\n    assert mul(${i}, 2) == ${i * 2}\n`),
  'def test_add_small():\n    assert add(1, 2) == 3\n',
  // Its captured output (~40 KB) is printed in the failure section: the observation must be cut.
  'def test_add_zero():\n    for i in range(2000):\n        print("noise line", i)\n    assert add(0, 5) == 5, "adding zero changes nothing"\n',
].join('\n');
const ONE = 'tests/test_calc.py::test_add_small';

let fixture: RepairFixture;

beforeAll(async () => {
  fixture = await repairFixture('agenticfix-observations-', { 'calc.py': CALC, 'tests/test_calc.py': SUITE });
});
afterAll(() => fixture.cleanup());

const engine = await needDocker();
describeIf(engine)('test observations through the agent loop, in Docker', () => {
  it('builds, runs a script, and a failing 332-test run reaches the model as JSON with failures first; tests selects one test', async () => {
    const version = fileVersion(CALC);
    const config = fixture.config();
    const { result, requests } = await fixture.repair(
      config,
      [
        call('build_environment', { dockerfile: `FROM ${BASE_IMAGE}\nRUN echo building && exit 3\n` }, 'bad'),
        call('build_environment', { dockerfile: DOCKERFILE }, 'b'),
        call(
          'run_command',
          { script: "python3 -c 'from calc import add; print(add(1, 2))'; id -u; ls /sys/class/net" },
          'cmd',
        ),
        call('run_tests', {}, 'all'),
        call('run_tests', { tests: [ONE] }, 'one'),
        call('edit_file', { path: 'calc.py', old_text: 'a - b', new_text: 'a + b', version }, 'e'),
        call('run_tests', { tests: [ONE] }, 'fixed'),
        call('run_tests', { tests: [ONE], at: 'base' }, 'base'),
        call('finish', { summary: 'add() adds' }, 'f'),
      ],
      { testArgv: ['python3', '-m', 'pytest', '-v', '-rA'] },
    );
    expect(result.stop_reason).toBe('completed');
    const task = (requests[0]!.body as { messages: { content: string }[] }).messages[1]!.content;
    expect(task).toContain(`Base images available locally: `);
    expect(task).toContain(BASE_IMAGE);
    expect(task).toContain('mounted at /workspace (the working directory), without network');
    // Each observation as the model first saw it (later requests elide old ones).
    const seen = (id: string) => observation(requests, id);

    // Build observations: on failure the failing step and its error without builder noise; on success no log.
    const bad = JSON.parse(seen('bad'));
    expect(bad).toMatchObject({ success: false, error_code: 'build_failed' });
    const badLog = [...bad.data.log.head, ...bad.data.log.tail, ...bad.data.log.error_lines].join('\n');
    expect(badLog).toMatch(/^Step 2: RUN echo building && exit 3$/m);
    expect(badLog).toMatch(/returned a non-zero code: 3/);
    expect(badLog).not.toMatch(/ ---> |Removing intermediate container|Step \d+\/\d+/);
    const good = JSON.parse(seen('b'));
    expect(good).toMatchObject({ success: true, truncated: false });
    // `cached_steps` only when an earlier build left the layer (issue 40); `warnings` only when there are some.
    expect(
      Object.keys(good.data)
        .filter((k) => k !== 'cached_steps')
        .sort(),
    ).toEqual(['cache_hit', 'duration_ms', 'image_id', 'image_tag', 'runtime', 'steps']);
    // The versions the tests will see, for the detected runner (pytest).
    expect(good.data.runtime).toEqual({
      'python3 --version': expect.stringMatching(/^Python 3\.\d+\.\d+$/),
      'python3 -m pytest --version': expect.stringMatching(/^pytest \d+\.\d+/),
    });
    expect(good.data.steps).toEqual([
      `FROM ${BASE_IMAGE}`,
      'RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest && rm -rf /var/lib/apt/lists/*',
    ]);

    // A reproduction script runs in the same container: the repository as working directory, not root, no network.
    const cmd = JSON.parse(seen('cmd'));
    expect(cmd.data).toMatchObject({ status: 'passed', exit_code: 0 });
    const [printed, uid, nets] = cmd.data.stdout.trim().split('\n');
    expect(printed).toBe('-1');
    expect(uid).not.toBe('0');
    expect(nets).toBe('lo');

    // The whole suite: ~70 KB of output, cut to the observation cap as valid JSON.
    const all = seen('all');
    expect(all.length).toBeLessThanOrEqual(config.limits.observationMaxChars);
    const a = JSON.parse(all);
    // Passing lines left out are no cut (issue 36): they are counted on their own.
    expect(a).toMatchObject({ success: true, error_code: null, fatal: false, truncated: false });
    expect(a.data.passing_lines_omitted).toBeGreaterThan(0);
    expect(a.data).toMatchObject({ status: 'failed', exit_code: 1, summary: { passed: PASSING, failed: 2 } });
    expect(a.data.failures).toEqual([
      { id: 'tests/test_calc.py::test_add_small', message: expect.stringContaining('assert -1 == 3') },
      {
        id: 'tests/test_calc.py::test_add_zero',
        message: expect.stringContaining('adding zero changes nothing'),
      },
    ]);
    expect(a.data.stdout).toMatch(new RegExp(`=+ 2 failed, ${PASSING} passed in [\\d.]+s =+\\n?$`));
    expect(a.data.stdout).toMatch(/passing-test lines left out/);
    expect(a.data.stdout).not.toMatch(/^PASSED /m);
    expect(a.data.stdout).toMatch(/^FAILED tests\/test_calc.py::test_add_zero - AssertionError/m);
    // The failing test's 2,000 printed lines are cut inside its failure entry, its assertion kept.
    expect(a.data.failures[1].message).toMatch(/\[\.\.\. \d+ lines of captured output cut \.\.\.\]/);
    expect(a.data.stdout).toContain('[failure of tests/test_calc.py::test_add_zero: in failures]');
    expect(a.data.stdout).toMatch(/^=+ test session starts =+$/m);

    // One test, selected by id, run by pytest in the container.
    const one = JSON.parse(seen('one'));
    expect(one.data).toMatchObject({ tests: [ONE], status: 'failed', summary: { passed: 0, failed: 1 } });
    expect(one.data.command).toEqual(['python3', '-m', 'pytest', '-v', '-rA', ONE]);
    expect(one.data.failures.map((f: { id: string }) => f.id)).toEqual([ONE]);
    expect(one.data.stdout).toMatch(/=+ 1 failed in [\d.]+s =+\n?$/);
    expect(one.truncated).toBe(false);

    const fixed = JSON.parse(seen('fixed'));
    expect(fixed.data).toMatchObject({ status: 'passed', failures: [], summary: { passed: 1, failed: 0 } });

    // The same test at the base revision, in the same image: it fails there, the edit stays in place.
    const base = JSON.parse(seen('base'));
    expect(base.data).toMatchObject({ at: 'base', revision: result.base_commit, status: 'failed' });
    expect(base.data.failures.map((f: { id: string }) => f.id)).toEqual([ONE]);
    expect(result.patch).toContain('+    return a + b');
    expect(result.last_test).toMatchObject({ status: 'passed', tests: [ONE] });
  }, 600_000); // builds an image: minutes on a busy machine
});
