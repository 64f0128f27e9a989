import { existsSync, readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type Docker from 'dockerode';
import { execa } from 'execa';
import type { Config } from '../config/config.js';
import { LABEL } from '../environment/docker.js';

/**
 * The network builds run on: a Docker bridge of its own whose traffic to the host, private, loopback
 * and link-local addresses is dropped by iptables rules, with the resolvers (port 53) and an optional
 * proxy as the only exceptions. The rule list is computed as data (`buildNetworkRules`) and applied
 * idempotently in chains of its own, jumped to from DOCKER-USER (forwarded traffic) and INPUT
 * (traffic to any of the host's own addresses, the bridge gateway included, never crosses FORWARD).
 */

export type BuildNetworkConfig = Config['sandbox']['buildNetwork'];

/** Fixed names, so the rules keep matching when the network is re-created or the app restarts. */
export interface BuildNetworkNames {
  network: string;
  /** The bridge interface (at most 15 characters) the rules match with `-i`. */
  bridge: string;
  /** Prefix of the chains; `<chain>` holds the forward rules, `<chain>-IN` the input rules. */
  chain: string;
}

export const BUILD_NETWORK: BuildNetworkNames = {
  network: 'agenticfix-build',
  bridge: 'agenticfix-bld',
  chain: 'AGENTICFIX-BUILD',
};
export const NETWORK_LABEL = 'agenticfix.network';

/**
 * IPv4 destinations a build never reaches: RFC 1918, carrier-grade NAT, loopback, link-local (cloud
 * metadata), "this network", IETF assignments, benchmarking, multicast and reserved. The documentation
 * ranges are left open: some sandboxed egresses (this project's CI among them) answer there.
 */
export const BLOCKED_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
] as const;

/** One `iptables -S` line of a chain: `-A <chain> <args>`. */
export interface Chain {
  name: string;
  rules: string[][];
}
/** A rule inserted first in a built-in or Docker chain that sends the bridge's traffic to ours. */
export interface Jump {
  from: string;
  rule: string[];
}
export interface FamilyRules {
  binary: 'iptables' | 'ip6tables';
  chains: Chain[];
  jumps: Jump[];
}

export interface RuleInputs {
  names: BuildNetworkNames;
  dns: string[];
  proxy?: { host: string; port: number };
  /** The host's own IPv4 subnets (CIDR), its LAN: dropped like the private ranges. */
  hostSubnets: string[];
}

const ip4 = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const dotted = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
/** `192.0.2.7/24` → `192.0.2.0/24`, as iptables prints it. */
export function networkOf(cidr: string): string {
  const [addr = '', bits = '32'] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  return `${dotted(Math.floor(ip4(addr) / size) * size)}/${bits}`;
}
const within = (cidr: string, range: string) => {
  const [a = '', ab = '32'] = cidr.split('/');
  const [r = '', rb = '32'] = range.split('/');
  return Number(ab) >= Number(rb) && networkOf(`${a}/${rb}`) === networkOf(`${r}/${rb}`);
};

/** The rules for both address families, in the exact form `iptables -S` prints them. Pure. */
export function buildNetworkRules(i: RuleInputs): FamilyRules[] {
  const { chain, bridge } = i.names;
  const established = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'RETURN'];
  const exceptions = [
    ...i.dns.flatMap((ip) =>
      ['udp', 'tcp'].map((p) => ['-d', `${ip}/32`, '-p', p, '-m', p, '--dport', '53', '-j', 'RETURN']),
    ),
    ...(i.proxy
      ? [
          [
            '-d',
            `${i.proxy.host}/32`,
            '-p',
            'tcp',
            '-m',
            'tcp',
            '--dport',
            String(i.proxy.port),
            '-j',
            'RETURN',
          ],
        ]
      : []),
  ];
  const lan = [...new Set(i.hostSubnets.map(networkOf))].filter((s) => !BLOCKED_V4.some((r) => within(s, r)));
  // With a proxy nothing else is reachable; without one, everything but the blocked ranges.
  const drops = i.proxy ? [['-j', 'DROP']] : [...BLOCKED_V4, ...lan].map((r) => ['-d', r, '-j', 'DROP']);
  const input = `${chain}-IN`;
  return [
    {
      binary: 'iptables',
      chains: [
        { name: chain, rules: [established, ...exceptions, ...drops] },
        { name: input, rules: [established, ...exceptions, ['-j', 'DROP']] },
      ],
      jumps: [
        { from: 'DOCKER-USER', rule: ['-i', bridge, '-j', chain] },
        { from: 'INPUT', rule: ['-i', bridge, '-j', input] },
      ],
    },
    {
      // The network has no IPv6: nothing leaves the bridge over it.
      binary: 'ip6tables',
      chains: [{ name: chain, rules: [['-j', 'DROP']] }],
      jumps: [
        { from: 'FORWARD', rule: ['-i', bridge, '-j', chain] },
        { from: 'INPUT', rule: ['-i', bridge, '-j', chain] },
      ],
    },
  ];
}

/** `iptables -S <chain>` for the chain as computed. */
export const chainListing = (c: Chain) => [
  `-N ${c.name}`,
  ...c.rules.map((r) => `-A ${c.name} ${r.join(' ')}`),
];

/** The IPv4 nameservers of the host's resolv.conf: what Docker's embedded resolver forwards to. */
export function systemResolvers(file = '/etc/resolv.conf'): string[] {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  return [...text.matchAll(/^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/gm)]
    .map((m) => m[1] ?? '')
    .filter((ip) => !ip.startsWith('127.'));
}

/** The host's own IPv4 subnets, other than loopback. */
export function hostSubnets(): string[] {
  return Object.values(networkInterfaces())
    .flatMap((addrs) => addrs ?? [])
    .filter((a) => a.family === 'IPv4' && !a.internal && a.cidr)
    .map((a) => a.cidr ?? '');
}

export class BuildNetworkError extends Error {}

async function xtables(binary: string, args: string[], input?: string) {
  const res = await execa(binary, ['-w', ...args], { reject: false, input, stripFinalNewline: false });
  if (res.exitCode !== 0) {
    const why =
      res.code === 'ENOENT' ? `${binary} is not installed` : String(res.stderr || res.message).trim();
    throw new BuildNetworkError(`${binary} ${args.join(' ')}: ${why.slice(0, 500)}`);
  }
  return res.stdout;
}

const succeeds = (binary: string, args: string[]) =>
  xtables(binary, args).then(
    () => true,
    () => false,
  );

const listing = (out: string) => out.split('\n').filter((l) => l.startsWith('-'));

/** Installs one family's chains (replaced atomically, only when they differ) and jumps (once each). */
async function applyFamily(f: FamilyRules): Promise<void> {
  const stale: Chain[] = [];
  for (const c of f.chains) {
    const now = await xtables(f.binary, ['-S', c.name]).catch(() => '');
    if (listing(now).join('\n') !== chainListing(c).join('\n')) stale.push(c);
  }
  if (stale.length > 0) {
    // Declaring a chain in --noflush mode empties it; the whole table update is one transaction.
    const text = ['*filter', ...stale.map((c) => `:${c.name} - [0:0]`)];
    for (const c of stale) text.push(...c.rules.map((r) => `-A ${c.name} ${r.join(' ')}`));
    await xtables(`${f.binary}-restore`, ['--noflush'], `${[...text, 'COMMIT'].join('\n')}\n`);
  }
  for (const j of f.jumps) {
    if (!(await succeeds(f.binary, ['-C', j.from, ...j.rule])))
      await xtables(f.binary, ['-I', j.from, '1', ...j.rule]);
  }
}

/** Removes the jumps and chains of these rules (a no-op for what is already gone). */
export async function removeRules(families: FamilyRules[]): Promise<void> {
  for (const f of families) {
    for (const j of f.jumps) {
      while (await succeeds(f.binary, ['-D', j.from, ...j.rule])); // one copy per call
    }
    for (const c of f.chains) await xtables(f.binary, ['-F', c.name]).catch(() => undefined);
    for (const c of f.chains) await xtables(f.binary, ['-X', c.name]).catch(() => undefined);
  }
}

/** Creates the bridge if it is missing; an existing one must carry the options the rules rely on. */
async function ensureDockerNetwork(docker: Docker, names: BuildNetworkNames): Promise<void> {
  const options = {
    'com.docker.network.bridge.name': names.bridge,
    'com.docker.network.bridge.enable_icc': 'false',
  };
  const inspect = () =>
    docker
      .getNetwork(names.network)
      .inspect()
      .catch(() => null) as Promise<{ Driver: string; Options?: Record<string, string> } | null>;
  let net = await inspect();
  let createError = '';
  if (!net) {
    await docker
      .createNetwork({
        Name: names.network,
        Driver: 'bridge',
        CheckDuplicate: true,
        Options: options,
        Labels: { [LABEL]: '1', [NETWORK_LABEL]: 'build' },
      })
      .catch((err: unknown) => (createError = `: ${String(err)}`.slice(0, 500))); // a concurrent creation wins
    net = await inspect();
  }
  const wrong = Object.entries(options).filter(([k, v]) => net?.Options?.[k] !== v);
  if (!net || net.Driver !== 'bridge' || wrong.length > 0)
    throw new BuildNetworkError(
      net
        ? `Docker network ${names.network} exists without ${wrong.map(([k, v]) => `${k}=${v}`).join(', ') || 'the bridge driver'}; remove it so AgenticFix can create it`
        : `cannot create Docker network ${names.network}${createError}`,
    );
}

let queue: Promise<unknown> = Promise.resolve();

/** The network mode builds run with: Docker's default bridge only when the operator chose `unrestricted`. */
export const buildNetworkMode = (cfg: BuildNetworkConfig, names: BuildNetworkNames = BUILD_NETWORK) =>
  cfg.mode === 'unrestricted' ? 'default' : names.network;

/** Docker's predefined proxy build arguments (never part of the image's history) for a configured proxy. */
export function proxyBuildArgs(cfg: BuildNetworkConfig): Record<string, string> {
  if (!cfg.proxy) return {};
  const url = cfg.proxy.url;
  const no: Record<string, string> =
    cfg.noProxy === undefined ? {} : { NO_PROXY: cfg.noProxy, no_proxy: cfg.noProxy };
  return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url, ...no };
}

/** The rules as they are installed on this host now (inputs read from the host). */
export const hostRules = (cfg: BuildNetworkConfig, names: BuildNetworkNames = BUILD_NETWORK) =>
  buildNetworkRules({
    names,
    dns: cfg.dns ?? systemResolvers(),
    proxy: cfg.proxy,
    hostSubnets: hostSubnets(),
  });

/**
 * Makes sure the build network and its rules are in place (`preinstalled`: only the network, the rules
 * are the operator's; `unrestricted`: nothing). Calls in one process run one after the other;
 * re-applying unchanged rules changes nothing. Throws a BuildNetworkError saying what the operator
 * must do when the rules cannot be installed.
 */
export function ensureBuildNetwork(
  docker: Docker,
  cfg: BuildNetworkConfig,
  names: BuildNetworkNames = BUILD_NETWORK,
): Promise<void> {
  if (cfg.mode === 'unrestricted') return Promise.resolve();
  const run = queue.then(async () => {
    await ensureDockerNetwork(docker, names);
    if (cfg.mode === 'preinstalled') return;
    // Rules installed in another namespace (the app in a container of its own) would filter nothing.
    if (!existsSync(`/sys/class/net/${names.bridge}`))
      throw new BuildNetworkError(
        `the bridge ${names.bridge} is not in this network namespace: run the app in the host's network namespace ` +
          '(a container: --network host, as root, --cap-add NET_ADMIN), or install the rules on the host with ' +
          '`agenticfix build-network` (as root) and set AGENTICFIX_BUILD_NETWORK=preinstalled',
      );
    try {
      // Without kernel IPv6 there is no IPv6 traffic to filter.
      for (const f of hostRules(cfg, names))
        if (f.binary === 'iptables' || existsSync('/proc/net/if_inet6')) await applyFamily(f);
    } catch (err) {
      throw new BuildNetworkError(
        `cannot install the build network rules (${err instanceof Error ? err.message : String(err)}). ` +
          'They need root or CAP_NET_ADMIN in the host network namespace and Docker managing iptables (DOCKER-USER). ' +
          'Either install them as root with `agenticfix build-network` and set AGENTICFIX_BUILD_NETWORK=preinstalled, ' +
          'or set AGENTICFIX_BUILD_NETWORK=unrestricted to build on Docker’s default bridge, which lets untrusted ' +
          'builds reach the host and internal networks.',
      );
    }
  });
  queue = run.catch(() => undefined);
  return run;
}
