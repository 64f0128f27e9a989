import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { signBody } from '../emulator/github-webhooks.js';
import { connect, postBytes, type Connection } from './raw-http.js';
import { threadTimes } from './stats.js';

/**
 * The webhook benchmark's sender on its own thread, so that building, signing and sending 200
 * requests is not counted as the app's acknowledgement latency. Each message is a URL and issue
 * numbers, labelled all at once once the connections are set up and the app said go; the answer is
 * each delivery's latency in ms, how long writing the burst took and how long the sender waited for a CPU.
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

/** Set while a burst is ready: the app's go sends it. */
let go: (() => void) | undefined;

parentPort!.on('message', (m: { url: string; issues: number[] } | 'go') => {
  if (m === 'go') return go?.();
  const { url, issues } = m;
  // All built, signed and connected first: preparing the 200th must not count in the first one's latency.
  // A connection of its own per delivery: a burst measures answering, not 200 TCP handshakes, and
  // GitHub's deliveries come from many machines.
  const target = new URL(url);
  const built = issues.map((i) => postBytes(target, build(i)));
  // /ping: the cheapest answer the app has, so that setting connections up leaves no work behind.
  const warmUp = Buffer.from(`GET /ping HTTP/1.1\r\nhost: ${target.host}\r\nconnection: keep-alive\r\n\r\n`);
  Promise.all(built.map(() => connect(target)))
    .then(async (connections) => {
      try {
        // One answered request on each connection first: the server has set every connection up.
        await Promise.all(connections.map((c) => c.send(warmUp)));
        // Ready: the app notes where its own thread stands, then says go.
        await new Promise<void>((resolve) => {
          go = resolve;
          parentPort!.postMessage({ ready: true });
        });
        go = undefined;
        const t0 = performance.now();
        const waited0 = threadTimes().waitUs;
        const answers = connections.map((c, i) => deliver(c, built[i]!));
        // Until every request is written this thread reads no answer: that much of an early answer's
        // latency is the sender's.
        const writeMs = performance.now() - t0;
        const ms = await Promise.all(answers);
        // This thread's wait for a CPU meanwhile: the machine's load, as the sender met it.
        return { ms, writeMs, waitMs: (threadTimes().waitUs - waited0) / 1000 };
      } finally {
        for (const c of connections) c.socket.destroy();
      }
    })
    .then(
      (burst) => parentPort!.postMessage(burst),
      (err: unknown) => parentPort!.postMessage({ error: String(err) }),
    );
});
