import { jest } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { execa } from 'execa';
import { buildNetworkCommand } from '../../../src/cli/build-network.js';
import { serveCommand } from '../../../src/cli/serve.js';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { SECRET_ENV_NAMES } from '../../../src/config/env.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import {
  BLOCKED_V4,
  BUILD_NETWORK,
  buildNetworkMode,
  buildNetworkRules,
  chainListing,
  ensureBuildNetwork,
  hostRules,
  networkOf,
  proxyBuildArgs,
  removeRules,
  systemResolvers,
  type BuildNetworkNames,
  type FamilyRules,
} from '../../../src/images/network.js';
import { startApp, type RunningApp } from '../../../src/app.js';
import { APP_ID, PRIVATE_KEY, quietLog, SECRET, tempDir, testConfig } from '../../support/app.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { compose } from '../../../src/cli/compose.js';

const NAMES = BUILD_NETWORK;
const rulesOf = (families: FamilyRules[], binary: string) => families.find((f) => f.binary === binary)!;
const line = (chain: string, rule: string[]) => `-A ${chain} ${rule.join(' ')}`;

describe('build network rules (pure)', () => {
  const base = { names: NAMES, dns: ['10.255.255.53'], hostSubnets: ['192.0.2.2/24', '172.17.0.1/16'] };

  it('lets replies and the resolvers (port 53, udp and tcp) through before dropping private, link-local and loopback ranges', () => {
    const v4 = rulesOf(buildNetworkRules(base), 'iptables');
    const fwd = chainListing(v4.chains[0]!);
    expect(fwd.slice(0, 4)).toEqual([
      '-N AGENTICFIX-BUILD',
      '-A AGENTICFIX-BUILD -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
      '-A AGENTICFIX-BUILD -d 10.255.255.53/32 -p udp -m udp --dport 53 -j RETURN',
      '-A AGENTICFIX-BUILD -d 10.255.255.53/32 -p tcp -m tcp --dport 53 -j RETURN',
    ]);
    for (const range of [
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '100.64.0.0/10',
      '169.254.0.0/16',
      '127.0.0.0/8',
    ])
      expect(fwd).toContain(`-A AGENTICFIX-BUILD -d ${range} -j DROP`);
    // The host's LAN is dropped too; a bridge subnet already inside 172.16/12 is not listed twice.
    expect(fwd).toContain('-A AGENTICFIX-BUILD -d 192.0.2.0/24 -j DROP');
    expect(fwd.filter((l) => l.includes('172.17.'))).toEqual([]);
    // Only the listed ranges: the rest of the internet stays reachable (no catch-all drop).
    expect(fwd.at(-1)).toBe('-A AGENTICFIX-BUILD -d 192.0.2.0/24 -j DROP');
    expect(fwd).toHaveLength(1 + 3 + BLOCKED_V4.length + 1);
  });

  it('keeps the host itself out: every host address (the gateway included) goes through INPUT, where all but the exceptions drop', () => {
    const v4 = rulesOf(buildNetworkRules(base), 'iptables');
    expect(chainListing(v4.chains[1]!)).toEqual([
      '-N AGENTICFIX-BUILD-IN',
      '-A AGENTICFIX-BUILD-IN -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
      '-A AGENTICFIX-BUILD-IN -d 10.255.255.53/32 -p udp -m udp --dport 53 -j RETURN',
      '-A AGENTICFIX-BUILD-IN -d 10.255.255.53/32 -p tcp -m tcp --dport 53 -j RETURN',
      '-A AGENTICFIX-BUILD-IN -j DROP',
    ]);
    expect(v4.jumps).toEqual([
      { from: 'DOCKER-USER', rule: ['-i', 'agenticfix-bld', '-j', 'AGENTICFIX-BUILD'] },
      { from: 'INPUT', rule: ['-i', 'agenticfix-bld', '-j', 'AGENTICFIX-BUILD-IN'] },
    ]);
    // The network has no IPv6: all of it is dropped, forwarded or to the host.
    const v6 = rulesOf(buildNetworkRules(base), 'ip6tables');
    expect(chainListing(v6.chains[0]!)).toEqual(['-N AGENTICFIX-BUILD', '-A AGENTICFIX-BUILD -j DROP']);
    expect(v6.jumps.map((j) => j.from)).toEqual(['FORWARD', 'INPUT']);
  });

  it('with a proxy, the resolvers and the proxy are the only destinations', () => {
    const v4 = rulesOf(buildNetworkRules({ ...base, proxy: { host: '10.1.2.3', port: 3128 } }), 'iptables');
    expect(chainListing(v4.chains[0]!).slice(2)).toEqual([
      '-A AGENTICFIX-BUILD -d 10.255.255.53/32 -p udp -m udp --dport 53 -j RETURN',
      '-A AGENTICFIX-BUILD -d 10.255.255.53/32 -p tcp -m tcp --dport 53 -j RETURN',
      '-A AGENTICFIX-BUILD -d 10.1.2.3/32 -p tcp -m tcp --dport 3128 -j RETURN',
      '-A AGENTICFIX-BUILD -j DROP',
    ]);
    expect(chainListing(v4.chains[1]!)).toContain(
      '-A AGENTICFIX-BUILD-IN -d 10.1.2.3/32 -p tcp -m tcp --dport 3128 -j RETURN',
    );
    const proxy = { host: '10.1.2.3', port: 3128, url: 'http://10.1.2.3:3128' };
    expect(proxyBuildArgs({ mode: 'isolated', proxy })).toEqual({
      HTTP_PROXY: 'http://10.1.2.3:3128',
      HTTPS_PROXY: 'http://10.1.2.3:3128',
      http_proxy: 'http://10.1.2.3:3128',
      https_proxy: 'http://10.1.2.3:3128',
    });
    expect(proxyBuildArgs({ mode: 'isolated', proxy, noProxy: 'localhost,.corp' })).toMatchObject({
      NO_PROXY: 'localhost,.corp',
      no_proxy: 'localhost,.corp',
    });
    expect(proxyBuildArgs({ mode: 'isolated' })).toEqual({});
  });

  it('normalises subnets and reads the resolvers Docker forwards to', () => {
    expect(networkOf('192.0.2.77/24')).toBe('192.0.2.0/24');
    expect(networkOf('10.255.255.53/32')).toBe('10.255.255.53/32');
    const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-resolv-'));
    const file = path.join(dir, 'resolv.conf');
    writeFileSync(file, 'search x\nnameserver 127.0.0.53\nnameserver 10.255.255.53\nnameserver fd00::1\n');
    expect(systemResolvers(file)).toEqual(['10.255.255.53']);
    rmSync(dir, { recursive: true });
  });

  it('is configured by AGENTICFIX_BUILD_NETWORK, _DNS and _PROXY, validated at start-up', () => {
    expect(loadConfig({}).sandbox.buildNetwork).toEqual({
      mode: 'isolated',
      dns: undefined,
      proxy: undefined,
      noProxy: undefined,
    });
    const c = loadConfig({
      AGENTICFIX_BUILD_NETWORK: 'unrestricted',
      AGENTICFIX_BUILD_DNS: '10.0.0.2, 10.0.0.3',
      AGENTICFIX_BUILD_PROXY: '10.0.0.9:3128',
    }).sandbox.buildNetwork;
    expect(c).toEqual({
      mode: 'unrestricted',
      dns: ['10.0.0.2', '10.0.0.3'],
      proxy: { host: '10.0.0.9', port: 3128, url: 'http://10.0.0.9:3128' },
      noProxy: undefined,
    });
    expect(buildNetworkMode(c)).toBe('default');
    expect(buildNetworkMode({ mode: 'isolated' })).toBe('agenticfix-build');
    expect(() => loadConfig({ AGENTICFIX_BUILD_PROXY: 'proxy.corp:3128' })).toThrow(/AGENTICFIX_BUILD_PROXY/);
    expect(() => loadConfig({ AGENTICFIX_BUILD_DNS: 'dns.corp' })).toThrow(/AGENTICFIX_BUILD_DNS/);
    expect(() => loadConfig({ AGENTICFIX_BUILD_NETWORK: 'open' })).toThrow(/AGENTICFIX_BUILD_NETWORK/);
  });

  it('takes the standard HTTP(S)_PROXY / NO_PROXY when AGENTICFIX_BUILD_PROXY is unset; credentials stay secret', () => {
    const std = loadConfig({
      HTTP_PROXY: 'http://10.0.0.7:8080',
      HTTPS_PROXY: 'http://user:s3cret@10.0.0.8:3128',
      no_proxy: 'localhost,.corp',
    }).sandbox.buildNetwork;
    expect(std.proxy).toEqual({ host: '10.0.0.8', port: 3128, url: 'http://user:s3cret@10.0.0.8:3128' });
    expect(std.noProxy).toBe('localhost,.corp');
    expect(proxyBuildArgs(std)).toMatchObject({ https_proxy: 'http://user:s3cret@10.0.0.8:3128' });
    expect(loadConfig({ http_proxy: 'http://10.0.0.7' }).sandbox.buildNetwork.proxy).toEqual({
      host: '10.0.0.7',
      port: 80,
      url: 'http://10.0.0.7',
    });
    // The app's own variable wins.
    expect(
      loadConfig({ AGENTICFIX_BUILD_PROXY: '10.0.0.9:3128', HTTPS_PROXY: 'http://10.0.0.8:1' }).sandbox
        .buildNetwork.proxy?.host,
    ).toBe('10.0.0.9');
    // The build network admits a proxy by address; the message names the variable, never the URL's secret.
    const named = () => loadConfig({ HTTPS_PROXY: 'http://user:pw@proxy.corp:3128' });
    expect(named).toThrow(/HTTPS_PROXY: builds need an http\(s\) proxy at an IPv4 address/);
    expect(named).not.toThrow(/pw/);
    expect(() => loadConfig({ HTTP_PROXY: 'not a url' })).toThrow(/HTTP_PROXY: not a URL/);
    expect(SECRET_ENV_NAMES).toEqual(expect.arrayContaining(['HTTPS_PROXY', 'http_proxy']));
  });
});

const engine = await needDocker();
const d = describeIf(engine);
const docker = new Docker();
const cfg: Config['sandbox'] = loadConfig({}).sandbox;
const runId = `test-net-${process.pid}-${Date.now()}`;
const xt = async (binary: string, ...args: string[]) => (await execa(binary, ['-w', ...args])).stdout;
const listing = (out: string) => out.split('\n').filter((l) => l.startsWith('-'));

d('build network (real engine and iptables)', () => {
  const dirs: string[] = [];
  let server: Server;
  let app: RunningApp;
  const connections: string[] = [];
  let port = 0;
  let appPort = 0;

  beforeAll(async () => {
    // The app on `serve`'s default address (every host address), and a listener that counts who connects.
    const home = tempDir('agenticfix-net-app-');
    dirs.push(home);
    app = await startApp({
      ...compose(testConfig(home)),
      config: testConfig(home),
      appId: APP_ID,
      privateKey: PRIVATE_KEY,
      webhookSecret: SECRET,
      host: '0.0.0.0',
      port: 0,
      log: quietLog,
    });
    appPort = Number(new URL(app.url).port);
    server = createServer((s) => {
      connections.push(String(s.remoteAddress));
      s.on('error', () => undefined); // the probe hangs up at once
      s.end('hello from the host\n');
    });
    await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.close();
    await app.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    const gc = new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1, imageMaxAgeMs: 1 });
    // The runs are over: their leases end (as a run's do), so GC can take their images.
    for (const id of ['isolated', 'unrestricted'].map((mode) => `${runId}-${mode}`))
      await gc.release(id).then(() => gc.gc({ runId: id }));
  });

  it('installs its rules idempotently, in chains of its own: ranges are checked by reading them', async () => {
    await ensureBuildNetwork(docker, cfg.buildNetwork);
    await ensureBuildNetwork(docker, cfg.buildNetwork);
    for (const f of hostRules(cfg.buildNetwork)) {
      for (const c of f.chains) expect(listing(await xt(f.binary, '-S', c.name))).toEqual(chainListing(c));
      for (const j of f.jumps) {
        const jumps = listing(await xt(f.binary, '-S', j.from)).filter((l) => l === line(j.from, j.rule));
        expect(jumps).toHaveLength(1);
      }
    }
    const fwd = listing(await xt('iptables', '-S', 'AGENTICFIX-BUILD'));
    const dns = fwd.findIndex((l) => / --dport 53 -j RETURN$/.test(l));
    expect(dns).toBeGreaterThan(0);
    for (const range of ['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10'])
      expect(fwd.indexOf(`-A AGENTICFIX-BUILD -d ${range} -j DROP`)).toBeGreaterThan(dns);
    const net = await docker.getNetwork(NAMES.network).inspect();
    expect(net.Options).toMatchObject({
      'com.docker.network.bridge.name': 'agenticfix-bld',
      'com.docker.network.bridge.enable_icc': 'false',
    });
    expect(net.Labels).toMatchObject({ agenticfix: '1', 'agenticfix.network': 'build' });
  });

  /** A build whose RUN step connects to the app and the listener on each host address, failing if one answers. */
  async function probeBuild(mode: 'isolated' | 'unrestricted') {
    await ensureBuildNetwork(docker, cfg.buildNetwork);
    const net = await docker.getNetwork(NAMES.network).inspect();
    const gateway = String(net.IPAM?.Config?.[0]?.Gateway);
    const lan = Object.entries(networkInterfaces())
      .filter(([name]) => !/^(docker|br-|veth|agenticfix|afxt)/.test(name))
      .flatMap(([, a]) => a ?? [])
      .find((a) => a.family === 'IPv4' && !a.internal)?.address;
    const targets = [gateway, '172.17.0.1', ...(lan ? [lan] : [])].flatMap((a) => [
      `${a}/${appPort}`,
      `${a}/${port}`,
    ]);
    const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-net-'));
    dirs.push(dir);
    writeFileSync(path.join(dir, 'README'), 'probe\n');
    const dockerfile = [
      `FROM ${BASE_IMAGE}`,
      `RUN ok=1; for t in ${targets.join(' ')}; do if timeout 5 bash -c "exec 3<>/dev/tcp/$t"; then echo "REACHED $t"; ok=0; fi; done; test $ok = 1`,
      'RUN apt-get update',
      '',
    ].join('\n');
    const builder = new DockerEnvironmentBuilder(docker, { ...cfg, buildNetwork: { mode } });
    const result = await builder.build({
      dockerfile,
      worktree: dir,
      runId: `${runId}-${mode}`,
      noCache: true,
    });
    return { result, gateway };
  }

  it('a RUN step cannot reach the app or a listener on the host (bridge gateways, docker0, the LAN address) yet resolves and reaches the apt mirror', async () => {
    const { result } = await probeBuild('isolated');
    expect({ success: result.success, error: result.error }).toEqual({ success: true, error: null });
    expect(connections).toEqual([]);
  }, 300_000);

  it('the same step on Docker’s default bridge (unrestricted, as builds ran before) reaches both', async () => {
    const { result, gateway } = await probeBuild('unrestricted');
    expect(result.success).toBe(false);
    expect([...result.log.head, ...result.log.tail]).toEqual(
      expect.arrayContaining([`REACHED 172.17.0.1/${appPort}`, `REACHED ${gateway}/${port}`]),
    );
    expect(connections.length).toBeGreaterThan(0);
  }, 300_000);

  it('`serve` refuses to start when it cannot install the rules (root without CAP_NET_ADMIN), saying what to do', async () => {
    // The real iptables binaries, run without the capability the rules need.
    const bin = tempDir('agenticfix-nocap-');
    dirs.push(bin);
    for (const name of ['iptables', 'iptables-restore', 'ip6tables', 'ip6tables-restore']) {
      const real = (await execa('sh', ['-c', `command -v ${name}`])).stdout;
      writeFileSync(
        path.join(bin, name),
        `#!/bin/sh\nexec setpriv --inh-caps=-net_admin --bounding-set=-net_admin ${real} "$@"\n`,
        { mode: 0o755 },
      );
    }
    const saved = { ...process.env };
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      Object.assign(process.env, {
        PATH: `${bin}:${process.env.PATH}`,
        APP_ID: String(APP_ID),
        PRIVATE_KEY,
        WEBHOOK_SECRET: SECRET,
        AGENTICFIX_HOME: tempDir('agenticfix-nocap-home-'),
      });
      dirs.push(String(process.env.AGENTICFIX_HOME));
      expect(await serveCommand([])).toBe(2);
      // One line (the tool's multi-line output folded) among the start-up check's (no model is configured either).
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(
        /^agenticfix serve: build network: cannot install the build network rules .*Permission denied.*root or CAP_NET_ADMIN.*agenticfix build-network.*AGENTICFIX_BUILD_NETWORK=preinstalled.*AGENTICFIX_BUILD_NETWORK=unrestricted.*$/m,
      );
      // Rules the operator installed (`agenticfix build-network` as root): the app only needs the network.
      await expect(ensureBuildNetwork(docker, { mode: 'preinstalled' })).resolves.toBeUndefined();
    } finally {
      stderr.mockRestore();
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });

  it('`agenticfix build-network` installs the same rules for operators and prints them', async () => {
    const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await buildNetworkCommand([])).toBe(0);
      const printed = out.mock.calls.map((c) => String(c[0])).join('');
      for (const f of hostRules(cfg.buildNetwork)) {
        for (const c of f.chains) expect(listing(await xt(f.binary, '-S', c.name))).toEqual(chainListing(c));
        expect(printed).toContain(chainListing(f.chains[0]!).join('\n'));
      }
      expect(printed).toContain('-A AGENTICFIX-BUILD -d 169.254.0.0/16 -j DROP');
      expect(printed).toContain('-I DOCKER-USER 1 -i agenticfix-bld -j AGENTICFIX-BUILD');
    } finally {
      out.mockRestore();
    }
  });

  it('removes cleanly, and a failure to install says what the operator must do', async () => {
    const tag = String(process.pid % 100000);
    const names: BuildNetworkNames = {
      network: `agenticfix-build-t${tag}`,
      bridge: `afxt${tag}`,
      chain: `AFXT-${tag}`,
    };
    const rules = hostRules(cfg.buildNetwork, names);
    try {
      await ensureBuildNetwork(docker, cfg.buildNetwork, names);
      expect(listing(await xt('iptables', '-S', `AFXT-${tag}-IN`)).at(-1)).toBe(`-A AFXT-${tag}-IN -j DROP`);
      await removeRules(rules);
      for (const binary of ['iptables', 'ip6tables'])
        expect(await xt(binary, '-S')).not.toContain(`AFXT-${tag}`);
      // iptables refuses chain names over 28 characters: a real installation failure.
      const bad = { ...names, chain: `AFXT-${tag}-${'X'.repeat(30)}` };
      await expect(ensureBuildNetwork(docker, cfg.buildNetwork, bad)).rejects.toThrow(
        /cannot install the build network rules .*root or CAP_NET_ADMIN.*AGENTICFIX_BUILD_NETWORK=unrestricted/s,
      );
    } finally {
      await removeRules(rules);
      await docker
        .getNetwork(names.network)
        .remove()
        .catch(() => undefined);
    }
  }, 60_000);
});
