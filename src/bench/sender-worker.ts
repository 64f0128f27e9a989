import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { signBody } from '../emulator/github-webhooks.js';
import { connect, postBytes, type Connection } from './raw-http.js';

/**
 * The webhook benchmark's sender on its own thread, so that building, signing and sending 200
 * requests is not counted as the app's acknowledgement latency. Each message is a URL and issue
 * numbers, labelled all at once; the answer is each delivery's latency in ms.
 */
const { secret, label, installationId } = workerData as {
  secret: string;
  label: string;
  installationId: number;
};

/** A signed delivery, built before the clock starts. */
function build(issue: number): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({
    action: 'labeled',
    issue: {
      number: issue,
      title: `issue ${issue}`,
      body: null,
      updated_at: new Date().toISOString(),
      labels: [{ name: label }],
    },
    label: { name: label },
    repository: {
      id: 1,
      name: 'repo',
      full_name: 'bench/repo',
      owner: { login: 'bench' },
      default_branch: 'main',
    },
    sender: { login: 'maintainer', type: 'User' },
    installation: { id: installationId },
  });
  const headers = {
    'content-type': 'application/json',
    'x-github-event': 'issues',
    'x-github-delivery': randomUUID(),
    'x-hub-signature-256': signBody(secret, body),
  };
  return { body, headers };
}

async function deliver(c: Connection, bytes: Buffer): Promise<number> {
  const t0 = performance.now();
  const status = await c.send(bytes);
  if (status < 200 || status >= 300) throw new Error(`delivery refused: ${status}`);
  return performance.now() - t0;
}

parentPort!.on('message', ({ url, issues }: { url: string; issues: number[] }) => {
  // All built, signed and connected first: preparing the 200th must not count in the first one's latency.
  // A connection of its own per delivery: a burst measures answering, not 200 TCP handshakes, and
  // GitHub's deliveries come from many machines.
  const target = new URL(url);
  const built = issues.map((i) => postBytes(target, build(i)));
  // /ping: the cheapest answer the app has, so that setting connections up leaves no work behind.
  const warmUp = Buffer.from(`GET /ping HTTP/1.1\r\nhost: ${target.host}\r\nconnection: keep-alive\r\n\r\n`);
  Promise.all(built.map(() => connect(target)))
    .then(async (connections) => {
      // One answered request on each connection first: the server has set every connection up.
      await Promise.all(connections.map((c) => c.send(warmUp)));
      try {
        return await Promise.all(connections.map((c, i) => deliver(c, built[i]!)));
      } finally {
        for (const c of connections) c.socket.destroy();
      }
    })
    .then(
      (ms) => parentPort!.postMessage({ ms }),
      (err: unknown) => parentPort!.postMessage({ error: String(err) }),
    );
});
