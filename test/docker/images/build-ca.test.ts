import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { execa } from 'execa';
import { loadConfig, type Config } from '../../../src/config/config.js';
import {
  BuildStepFilter,
  CA_STEPS,
  IMAGE_BUNDLE,
  IMAGE_CA,
  readBuildCa,
  withBuildCa,
} from '../../../src/images/build-ca.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import {
  CONTEXT_CA,
  environmentKey,
  snapshotWorktree,
  type SnapshotEntry,
} from '../../../src/images/docker-context.js';
import { LocalSandbox } from '../../../src/environment/local.js';
import { makeBuildEnvironmentTool } from '../../../src/tools/build-environment.js';
import type { ToolContext } from '../../../src/tools/types.js';
import { RunTrace } from '../../../src/trace/trace.js';
import { machineCa } from '../../support/ca.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf, itIf, missing, present } from '../../support/skip.js';

const dirs: string[] = [];
const temp = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-ca-'));
  dirs.push(dir);
  return dir;
};
/** A throwaway CA made for this run (unique content, so unique cache keys): the PEM file's path. */
function throwawayCa(): string {
  const dir = temp();
  const cert = path.join(dir, 'ca.crt');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
    ].concat([
      '-subj',
      '/CN=agenticfix throwaway test CA',
      '-keyout',
      path.join(dir, 'ca.key'),
      '-out',
      cert,
    ]),
    { stdio: 'ignore' },
  );
  return cert;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const without = (augmented: string) =>
  augmented
    .split('\n')
    .filter((l) => !CA_STEPS.includes(l))
    .join('\n');

describe('CA injection into the Dockerfile (pure)', () => {
  it('adds the steps right after every FROM whose stage runs a command, and nothing else', () => {
    const df = [
      '# escape=\\',
      'FROM --platform=linux/amd64 \\',
      '    node:20-alpine AS deps',
      '# a comment',
      'RUN npm ci',
      '',
      'FROM deps AS test',
      'RUN echo \\',
      'FROM not-an-instruction',
      'FROM scratch AS empty',
      'COPY --from=deps /x /x',
      'FROM distroless/static',
      'COPY . /app',
      'from debian:bookworm',
      'run apt-get update',
    ].join('\n');
    const { dockerfile, added } = withBuildCa(df);
    const lines = dockerfile.split('\n');
    const at = (line: string) => lines.indexOf(line);
    // Alpine (`deps`), a stage built on another and a lower-case Debian FROM: each gets the steps.
    expect(lines.slice(at('    node:20-alpine AS deps') + 1, at('# a comment'))).toEqual(CA_STEPS);
    expect(lines.slice(at('FROM deps AS test') + 1, at('RUN echo \\'))).toEqual(CA_STEPS);
    expect(lines.slice(at('from debian:bookworm') + 1, at('run apt-get update'))).toEqual(CA_STEPS);
    // A continuation line that reads like FROM, `scratch`, and a stage without RUN (maybe without a shell): untouched.
    expect(lines[at('RUN echo \\') + 1]).toBe('FROM not-an-instruction');
    expect(lines[at('FROM scratch AS empty') + 1]).toBe('COPY --from=deps /x /x');
    expect(lines[at('FROM distroless/static') + 1]).toBe('COPY . /app');
    expect(added).toBe(3 * CA_STEPS.length);
    expect(without(dockerfile)).toBe(df);
    expect(withBuildCa('FROM x\nCOPY a b\n')).toEqual({ dockerfile: 'FROM x\nCOPY a b\n', added: 0 });
  });

  it('installs the CA without update-ca-certificates and points every client at one bundle', () => {
    expect(CA_STEPS[0]).toBe(`COPY ${CONTEXT_CA} ${IMAGE_CA}`);
    const run = JSON.parse(CA_STEPS[1]!.replace(/^RUN /, '')) as string[];
    expect(run.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(run[2]).not.toMatch(/update-ca-certificates|apt|apk|dnf/);
    expect(CA_STEPS[2]).toBe(
      `ENV NODE_EXTRA_CA_CERTS=${IMAGE_CA} SSL_CERT_FILE=${IMAGE_BUNDLE} CURL_CA_BUNDLE=${IMAGE_BUNDLE} ` +
        `GIT_SSL_CAINFO=${IMAGE_BUNDLE} PIP_CERT=${IMAGE_BUNDLE} REQUESTS_CA_BUNDLE=${IMAGE_BUNDLE}`,
    );
  });

  it('hides the added steps from the build log and renumbers the model’s own', () => {
    const { added } = withBuildCa('FROM base\nRUN make\n');
    const engine = [
      'Step 1/6 : FROM base\n',
      ' ---> 1111\n',
      `Step 2/6 : ${CA_STEPS[0]!}\n ---> 2222\n`,
      `Step 3/6 : ${CA_STEPS[1]!}\n ---> Running in 3333\nRemoving intermediate container 3333\n ---> 4444\n`,
      `Step 4/6 : ${CA_STEPS[2]!}\n ---> Running in 5555\n`,
      'Step 5/6 : RUN make',
      '\n ---> Running in 6666\nmake: ok\n',
      'Step 6/6 : LABEL agenticfix.run=x\n',
      'Successfully built 7777',
    ];
    const f = new BuildStepFilter(added);
    const out = engine.map((c) => f.write(c)).join('') + f.end();
    expect(out).toBe(
      [
        'Step 1/3 : FROM base',
        ' ---> 1111',
        'Step 2/3 : RUN make',
        ' ---> Running in 6666',
        'make: ok',
        'Step 3/3 : LABEL agenticfix.run=x',
        'Successfully built 7777',
      ].join('\n'),
    );
  });

  it('makes the CA’s content part of the environment key', async () => {
    const repo = temp();
    writeFileSync(path.join(repo, 'a.txt'), 'a');
    writeFileSync(path.join(repo, CONTEXT_CA), 'planted by the repository');
    const snap = await snapshotWorktree(repo, 1024 * 1024);
    expect(snap.map((e) => e.path)).toEqual(['a.txt']); // the reserved name never comes from the worktree
    const entry = async (file: string) => (await readBuildCa(file)) as SnapshotEntry;
    const [a, b] = [await entry(throwawayCa()), await entry(throwawayCa())];
    const df = 'FROM base\nRUN true\n';
    const key = (ca: SnapshotEntry | null) =>
      ca
        ? environmentKey(withBuildCa(df).dockerfile, [...snap, ca], ['id'])
        : environmentKey(df, snap, ['id']);
    expect(key(a)).toBe(key({ ...a, content: Buffer.from(a.content!) }));
    expect(new Set([key(a), key(b), key(null)]).size).toBe(3);
  });

  it('refuses a CA file that is missing or holds no certificate, and reads AGENTICFIX_BUILD_CA_FILE', async () => {
    const notPem = path.join(temp(), 'key.pem');
    writeFileSync(notPem, '-----BEGIN PRIVATE KEY-----\n');
    expect(await readBuildCa(notPem)).toMatch(/holds no PEM certificate/);
    expect(await readBuildCa('/nonexistent/ca.crt')).toMatch(
      /cannot read AGENTICFIX_BUILD_CA_FILE: .*ENOENT/,
    );
    expect(loadConfig({ AGENTICFIX_BUILD_CA_FILE: '/etc/ca.pem' }).sandbox.buildNetwork.caFile).toBe(
      '/etc/ca.pem',
    );
    expect(loadConfig({}).sandbox.buildNetwork.caFile).toBeUndefined();
  });
});

const engine = await needDocker();
const d = describeIf(engine);
const docker = new Docker();
const cfg: Config['sandbox'] = loadConfig({}).sandbox;
const runId = `test-ca-${process.pid}-${Date.now()}`;
const withCa = (caFile?: string): Config['sandbox'] => ({
  ...cfg,
  buildNetwork: { ...cfg.buildNetwork, caFile },
});

/** Every builder of the suite: each holds leases (and a warm container) of its own until released. */
const builders: DockerEnvironmentBuilder[] = [];
const builderWith = (c: Config['sandbox']) => {
  const builder = new DockerEnvironmentBuilder(docker, c);
  builders.push(builder);
  return builder;
};

afterAll(async () => {
  if (!engine.ok) return; // nothing was built
  await Promise.all(builders.map((b) => b.release(runId)));
  await new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1, imageMaxAgeMs: 1 }).gc({ runId });
});

d('build CA (real engine)', () => {
  it('finds the system bundle of each image family, or starts one, and never fails the build', async () => {
    const ca = readFileSync(throwawayCa(), 'utf8');
    const script = (JSON.parse(CA_STEPS[1]!.replace(/^RUN /, '')) as string[])[2]!;
    const inImage = async (setup: string, user = '0') => {
      const res = await execa(
        'docker',
        ['run', '--rm', '--network', 'none', '--user', user, '-e', `CA=${ca}`, BASE_IMAGE, 'sh', '-c'].concat(
          `${setup}; mkdir -p ${path.dirname(IMAGE_CA)}; printf '%s\\n' "$CA" > ${IMAGE_CA}; chmod 644 ${IMAGE_CA}; ` +
            `${script}; echo "exit=$?"; readlink ${IMAGE_BUNDLE}; cat ${IMAGE_BUNDLE}; ls /etc/pki/ca-trust/source/anchors 2>/dev/null`,
        ),
        { reject: false },
      );
      return res.stdout;
    };
    const root = '-----BEGIN CERTIFICATE-----\nSYSTEMROOT\n-----END CERTIFICATE-----';
    // No ca-certificates (this base image): a Debian bundle is started with the CA alone.
    const bare = await inImage('true');
    expect(bare).toMatch(/^exit=0\n\/etc\/ssl\/certs\/ca-certificates\.crt\n\n-----BEGIN CERTIFICATE-----/);
    // Debian/Ubuntu/Alpine layout: the CA is appended to the roots there.
    const debian = await inImage(
      `mkdir -p /etc/ssl/certs; printf '%s\\n' '${root}' > /etc/ssl/certs/ca-certificates.crt`,
    );
    expect(debian).toContain(`/etc/ssl/certs/ca-certificates.crt\n${root}\n\n${ca.trim()}`);
    // RHEL/Fedora layout: appended to ca-bundle.crt and left in the anchors that update-ca-trust reads.
    const rhel = await inImage(
      `mkdir -p /etc/pki/tls/certs /etc/pki/ca-trust/source/anchors; printf '%s\\n' '${root}' > /etc/pki/tls/certs/ca-bundle.crt`,
    );
    expect(rhel).toContain(`/etc/pki/tls/certs/ca-bundle.crt\n${root}\n\n${ca.trim()}`);
    expect(rhel).toMatch(/agenticfix-build-ca\.crt\s*$/);
    // A non-root default user cannot write the bundle: the step still succeeds (NODE_EXTRA_CA_CERTS works).
    expect(await inImage('true', '1000')).toMatch(/^exit=0$/m);
  }, 60_000);

  it('rebuilds when the CA changes, reuses the image while it does not, and refuses an unreadable CA', async () => {
    const repo = temp();
    writeFileSync(path.join(repo, 'a.txt'), 'a');
    const dockerfile = `FROM ${BASE_IMAGE}\nRUN true\n`;
    const [a, b] = [throwawayCa(), throwawayCa()];
    const build = (caFile?: string) =>
      builderWith(withCa(caFile)).build({ dockerfile, worktree: repo, runId });
    const first = await build(a);
    expect(first).toMatchObject({ success: true, cache_hit: false, network: { proxy: false, ca: true } });
    const env = (await docker.getImage(first.image_id!).inspect()).Config.Env ?? [];
    expect(env).toContain(`NODE_EXTRA_CA_CERTS=${IMAGE_CA}`);
    expect(await build(a)).toMatchObject({ success: true, cache_hit: true, image_id: first.image_id });
    const changed = await build(b);
    expect(changed).toMatchObject({ success: true, cache_hit: false });
    expect(changed.image_id).not.toBe(first.image_id);
    const broken = await build('/nonexistent/ca.crt');
    expect(broken).toMatchObject({ success: false, network: { ca: true } });
    expect(broken.error).toMatch(/^build network: cannot read AGENTICFIX_BUILD_CA_FILE/);
  }, 120_000);

  // The npm registry is reachable from builds (docs/operating.md "Build network"); this machine's egress re-signs its TLS.
  const machine = machineCa(temp());
  const egressCa = 'the egress CA in /usr/local/share/ca-certificates (CI machines carry it)';
  const m = itIf(machine ? present(egressCa) : missing(egressCa, 'none there'));
  const registryDockerfile = [
    `FROM ${BASE_IMAGE}`,
    // The run id keeps the engine's layer cache from answering for the network. curl's error and its -w
    // line share one stream (2>&1): the engine's two streams of a step can interleave mid-line under load.
    `RUN echo ${runId} >/dev/null && apt-get update -qq && apt-get install -y -qq curl ca-certificates >/dev/null && ` +
      "curl -sS -o /dev/null -w 'registry %{http_code}\\n' https://registry.npmjs.org/left-pad 2>&1",
    '',
  ].join('\n');

  m(
    'with the machine CA, a build reaches the npm registry over TLS; its log shows only the model’s steps',
    async () => {
      const repo = temp();
      writeFileSync(path.join(repo, 'a.txt'), 'a');
      const builder = builderWith(withCa(machine!));
      const res = await builder.build({
        dockerfile: registryDockerfile,
        worktree: repo,
        runId,
        noCache: true,
      });
      const log = [...res.log.head, ...res.log.tail].join('\n');
      expect(res).toMatchObject({ success: true, network: { proxy: false, ca: true } });
      expect(log).toContain('registry 200');
      expect(log).toMatch(/^Step 2\/\d+ : RUN echo /m);
      expect(log).not.toMatch(/agenticfix-build-ca|NODE_EXTRA_CA_CERTS/);
    },
    300_000,
  );

  m(
    'without the CA the same build fails on the certificate',
    async () => {
      const repo = temp();
      writeFileSync(path.join(repo, 'a.txt'), 'a');
      const res = await builderWith(withCa(undefined)).build({
        dockerfile: registryDockerfile,
        worktree: repo,
        runId,
        noCache: true,
      });
      expect(res).toMatchObject({ success: false, network: { ca: false } });
      expect([...res.log.head, ...res.log.tail].join('\n')).toMatch(/curl: \(60\) SSL certificate problem/);
      expect(res.error).toMatch(/returned a non-zero code: 60/);
    },
    300_000,
  );

  it('build_environment records the settings in the trace and tells the model nothing of them', async () => {
    const repo = temp();
    writeFileSync(path.join(repo, 'a.txt'), 'a');
    const builder = builderWith(withCa(throwawayCa()));
    const runDir = temp();
    const trace = new RunTrace(runId, runDir);
    const ctx: ToolContext = {
      runId,
      worktree: repo,
      gitDir: path.join(repo, '.git'),
      baseCommit: 'HEAD',
      limits: loadConfig({}).limits,
      testCommands: { default: ['true'] },
      runDir,
      sandbox: new LocalSandbox(),
      environment: null,
      builder,
      trace,
    };
    const dockerfile = `FROM ${BASE_IMAGE}\nRUN echo ${runId}\n`;
    const bad = await makeBuildEnvironmentTool().run(ctx, { dockerfile: `${dockerfile}RUN false\n` });
    expect(bad).toMatchObject({ success: false, error_code: 'build_failed' });
    const good = await makeBuildEnvironmentTool().run(ctx, { dockerfile });
    expect(good).toMatchObject({ success: true, data: { cache_hit: false } });
    for (const res of [bad, good])
      expect(JSON.stringify(res)).not.toMatch(/agenticfix-build-ca|CERTIFICATE|NODE_EXTRA_CA_CERTS|Step 5/);
    expect(JSON.stringify(bad)).toMatch(/Step 3: RUN false/);
    expect(readFileSync(path.join(runDir, 'Dockerfile'), 'utf8')).toBe(dockerfile);
    const events = readFileSync(trace.eventsPath, 'utf8');
    expect(events).toMatch(/"type":"build_network".*"proxy":false,"ca":true/);
  }, 120_000);
});
