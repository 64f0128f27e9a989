import Docker from 'dockerode';
import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import { chainListing, ensureBuildNetwork, hostRules } from '../images/network.js';
import { command, parseCli } from './program.js';

/**
 * `agenticfix build-network`: creates the build network and installs its rules (as root, on the host),
 * then prints them. For operators whose app cannot install them itself (AGENTICFIX_BUILD_NETWORK=preinstalled);
 * rules do not survive a reboot, so run it at boot after Docker has started.
 */
export async function buildNetworkCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(
    command('build-network', 'create the build network and install its iptables rules (as root)'),
    z.strictObject({}),
    argv,
  );
  if (typeof parsed === 'number') return parsed;
  const cfg = { ...loadConfig().sandbox.buildNetwork, mode: 'isolated' as const };
  try {
    await ensureBuildNetwork(new Docker(), cfg);
  } catch (err) {
    process.stderr.write(`agenticfix build-network: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  for (const f of hostRules(cfg)) {
    const lines = [
      ...f.chains.flatMap(chainListing),
      ...f.jumps.map((j) => `-I ${j.from} 1 ${j.rule.join(' ')}`),
    ];
    process.stdout.write(`# ${f.binary}\n${lines.join('\n')}\n`);
  }
  return 0;
}
