import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  statSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config/config.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { DockerSandbox } from '../../../src/environment/docker.js';
import { LocalSandbox } from '../../../src/environment/local.js';
import type { Sandbox } from '../../../src/environment/types.js';
import { runCell } from '../../../src/verify/cells.js';
import { REPORT_DIR } from '../../../src/testrunners/reports/runner.js';
import { readBelow, readRegularFile } from '../../../src/workspace/safe-read.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/**
 * Issue 9, item 2: the judge read its test report with a plain read. A test that made the report a
 * symlink put a host file into the report (and a PR comment); one that made it a FIFO hung verify.
 */

const SECRET = `host-secret-${process.pid}-${Date.now()}`;
/** A host file outside every worktree, shaped as a valid JUnit report so a followed link would "pass" tests. */
const hostDir = mkdtempSync(path.join(tmpdir(), 'agenticfix-host-'));
const hostReport = path.join(hostDir, 'pytest.xml');
writeFileSync(
  hostReport,
  `<testsuite tests="1"><testcase classname="tests.test_x" name="${SECRET}" file="tests/test_x.py"/></testsuite>`,
);
const dirs: string[] = [hostDir];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function worktree(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-reads-'));
  dirs.push(dir);
  return dir;
}

/** pytest is detected from the last token, so the judge instruments the argv and reads `.agenticfix-report/pytest.xml`. */
const plant = (script: string) => ['sh', '-c', script, 'pytest'];

const cell = (sandbox: Sandbox, wt: string, argv: string[]) =>
  runCell(
    { name: 'base_base', source: 'base', tests: 'base' },
    {
      sandbox,
      worktree: wt,
      argv,
      timeoutMs: 20_000,
      maxOutputBytes: 64 * 1024,
      maxReportBytes: loadConfig({}).verify.maxReportBytes,
      reruns: 0,
      allowEmpty: false,
    },
  );

describe('safe reads', () => {
  it('refuses links, FIFOs and directories, and cuts at the size cap', () => {
    const wt = worktree();
    writeFileSync(path.join(wt, 'ok.txt'), 'hello world');
    symlinkSync(hostReport, path.join(wt, 'link.txt'));
    execFileSync('mkfifo', [path.join(wt, 'fifo')]);
    expect(readRegularFile(path.join(wt, 'ok.txt'), 5)).toMatchObject({ ok: true, truncated: true });
    const whole = readRegularFile(path.join(wt, 'ok.txt'), 100);
    expect(whole.ok && whole.buf.toString()).toBe('hello world');
    expect(readRegularFile(path.join(wt, 'link.txt'), 100)).toEqual({ ok: false, reason: 'a symbolic link' });
    expect(readRegularFile(path.join(wt, 'fifo'), 100)).toEqual({ ok: false, reason: 'not a regular file' });
    expect(readRegularFile(wt, 100)).toEqual({ ok: false, reason: 'not a regular file' });
    expect(readRegularFile(path.join(wt, 'none'), 100)).toEqual({ ok: false, reason: 'missing' });
    // A linked directory leads out of the worktree even though the file itself is regular.
    symlinkSync(hostDir, path.join(wt, 'dir'));
    expect(readBelow(wt, 'dir/pytest.xml', 1000)).toEqual({
      ok: false,
      reason: 'reached through a symbolic link',
    });
    mkdirSync(path.join(wt, 'real'));
    writeFileSync(path.join(wt, 'real', 'r.txt'), 'r');
    expect(readBelow(wt, 'real/r.txt', 1000)).toMatchObject({ ok: true });
  });
});

describe("the judge's report read (local sandbox)", () => {
  const local = new LocalSandbox();

  it('a report symlinked to a host file never brings its content into the cell', async () => {
    const wt = worktree();
    const c = await cell(local, wt, plant(`ln -s ${hostReport} ${REPORT_DIR}/pytest.xml`));
    expect(JSON.stringify(c)).not.toContain(SECRET);
    expect(c.report_source).not.toBe('junit-xml');
    expect(c.results).toEqual([]);
  });

  it('a report directory replaced by a link to a host directory is not followed', async () => {
    const wt = worktree();
    const c = await cell(local, wt, plant(`rmdir ${REPORT_DIR} && ln -s ${hostDir} ${REPORT_DIR}`));
    expect(JSON.stringify(c)).not.toContain(SECRET);
    expect(c.report_source).not.toBe('junit-xml');
    expect(existsSync(hostReport)).toBe(true); // removing the report directory removed only the link
  });

  it('a FIFO as the report: the cell finishes at once, the report counts as missing', async () => {
    const wt = worktree();
    const started = Date.now();
    const c = await cell(local, wt, plant(`mkfifo ${REPORT_DIR}/pytest.xml`));
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(c.report_source).not.toBe('junit-xml');
    expect(c.problem).toMatch(/no test collected/);
  }, 20_000);

  it('a real report is still read', async () => {
    const wt = worktree();
    const c = await cell(local, wt, plant(`cp ${hostReport} ${REPORT_DIR}/pytest.xml`));
    expect(c.report_source).toBe('junit-xml');
    expect(c.results.map((r) => r.status)).toEqual(['passed']);
  });
});

describeIf(await needDocker())("the judge's report read (Docker sandbox, real container)", () => {
  const docker = new Docker();
  const runId = `test-reads-${process.pid}-${Date.now()}`;
  let sandbox: DockerSandbox;

  beforeAll(async () => {
    const image = await docker.getImage(BASE_IMAGE).inspect();
    sandbox = new DockerSandbox(docker, image.Id, loadConfig({}).sandbox, runId);
  });
  afterAll(async () => {
    await new DockerEnvironmentBuilder(docker, {
      ...loadConfig({}).sandbox,
      imageKeep: 1,
      imageMaxAgeMs: 1,
    }).gc({
      runId,
    });
  });
  afterEach(async () => {
    const left = await docker.listContainers({ all: true, filters: { label: [`agenticfix.run=${runId}`] } });
    expect(left).toEqual([]);
  });

  it('a symlink and a FIFO planted by the container: no host content, no hang', async () => {
    const linked = worktree();
    const c1 = await cell(sandbox, linked, plant(`ln -s ${hostReport} ${REPORT_DIR}/pytest.xml`));
    expect(c1.status).toBe('passed'); // the container did plant it
    expect(JSON.stringify(c1)).not.toContain(SECRET);
    expect(c1.report_source).not.toBe('junit-xml');

    const piped = worktree();
    const started = Date.now();
    const c2 = await cell(sandbox, piped, plant(`mkfifo ${REPORT_DIR}/pytest.xml`));
    expect(c2.status).toBe('passed');
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(c2.report_source).not.toBe('junit-xml');
  }, 60_000);

  it('a FIFO planted as .dockerignore: the build goes on without it (it hung build_environment for 15 minutes)', async () => {
    const wt = worktree();
    writeFileSync(path.join(wt, 'app.txt'), 'app');
    execFileSync('mkfifo', [path.join(wt, '.dockerignore'), path.join(wt, 'pipe')]);
    const builder = new DockerEnvironmentBuilder(docker, loadConfig({}).sandbox);
    const res = await builder.build({
      dockerfile: `FROM ${BASE_IMAGE}\nCOPY . /ctx/\nRUN ls -A /ctx\n`,
      worktree: wt,
      runId,
      noCache: true, // the log must come from a real build, not an earlier run's cached image
    });
    await builder.release(runId); // the "run" is over: its image lease goes, as a run's would
    expect(res).toMatchObject({ success: true, error: null });
    expect([...res.log.head, ...res.log.tail]).toContain('app.txt');
    expect([...res.log.head, ...res.log.tail].join('\n')).not.toMatch(/^(\.dockerignore|pipe)$/m);
  }, 60_000);

  it('a link to a host directory planted in a lent (root-owned) worktree: the host files keep their owner', async () => {
    if (process.getuid?.() !== 0) return console.warn('not root: worktrees are not lent, case not exercised');
    const hostOwned = mkdtempSync(path.join(tmpdir(), 'agenticfix-owned-'));
    dirs.push(hostOwned);
    writeFileSync(path.join(hostOwned, 'data'), 'x');
    execFileSync('chown', ['-R', '4242:4242', hostOwned]);
    const wt = worktree(); // root-owned: lent to nobody for the run, handed back to root afterwards
    const out = await sandbox.run({
      argv: ['ln', '-s', hostOwned, '/workspace/planted'],
      worktree: wt,
      timeoutMs: 20_000,
      maxOutputBytes: 64 * 1024,
    });
    expect(out.status).toBe('passed');
    expect(lstatSync(path.join(wt, 'planted')).isSymbolicLink()).toBe(true);
    expect(lstatSync(path.join(wt, 'planted')).uid).toBe(0);
    expect(statSync(path.join(hostOwned, 'data')).uid).toBe(4242);
    expect(statSync(hostOwned).uid).toBe(4242);
  }, 60_000);
});
