import { parentPort, workerData } from 'node:worker_threads';
import { startGitHubEmulator } from '../emulator/github.js';

/**
 * The GitHub emulator on its own thread for the webhook benchmark: its git calls are synchronous and
 * would otherwise block the app's event loop and be counted as the app's acknowledgement latency.
 */
const { secret, publicKeyPem, issues } = workerData as {
  secret: string;
  publicKeyPem: string;
  issues: number;
};
const emu = await startGitHubEmulator({ webhookSecret: secret, publicKeyPem });
emu.createRepo('bench', 'repo', { files: { 'README.md': '# bench\n' } });
emu.setPermission('bench', 'repo', 'maintainer', 'write');
for (let i = 0; i < issues; i++) emu.createIssue('bench', 'repo', { title: `issue ${i}`, user: 'someone' });
parentPort!.on('message', (m: 'close' | { latencyMs: number }) => {
  if (m === 'close')
    void emu.close().then(() => parentPort!.close()); // a listening port keeps the thread alive
  else emu.setLatency(m.latencyMs);
});
parentPort!.postMessage({ url: emu.url, appId: emu.appId, installationId: emu.installationId('bench') });
