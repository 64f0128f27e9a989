import { randomUUID } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { signBody } from '../emulator/github-webhooks.js';

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

/** One request on its own connection: the bytes to write, and the answer's status once it is whole. */
interface Connection {
  socket: Socket;
  send(bytes: Buffer): Promise<number>;
}

/**
 * A kept-alive connection of its own per delivery, opened before the clock starts: a burst measures
 * answering, not 200 TCP handshakes (GitHub's deliveries come from many machines). Requests are written
 * as prebuilt bytes and answers read by hand: node:http's client costs ~0.2 ms a request on this
 * thread, which is what a 200-delivery burst measured before as the sender's own latency.
 */
function connect(url: URL): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(Number(url.port), url.hostname);
    socket.setNoDelay(true);
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve({ socket, send: (bytes) => exchange(socket, bytes) });
    });
  });
}

/** Writes one request and resolves with the answer's status when the whole answer has arrived. */
function exchange(socket: Socket, bytes: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const status = complete(got);
      if (status === null) return;
      socket.off('data', onData).off('error', reject);
      resolve(status);
    };
    socket.on('data', onData).once('error', reject);
    socket.write(bytes);
  });
}

/** The status of a whole HTTP/1.1 answer (Content-Length or chunked body), or null while one is partial. */
function complete(got: Buffer): number | null {
  const end = got.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = got.subarray(0, end).toString('latin1');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  const body = got.subarray(end + 4);
  if (length) return body.length >= Number(length[1]) ? status : null;
  return /\r\ntransfer-encoding: *chunked/i.test(head) && body.includes('0\r\n\r\n') ? status : null;
}

function requestBytes(url: URL, { body, headers }: ReturnType<typeof build>): Buffer {
  const lines = [`POST ${url.pathname} HTTP/1.1`, `host: ${url.host}`, 'connection: keep-alive'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  lines.push(`content-length: ${Buffer.byteLength(body)}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

async function deliver(c: Connection, bytes: Buffer): Promise<number> {
  const t0 = performance.now();
  const status = await c.send(bytes);
  if (status < 200 || status >= 300) throw new Error(`delivery refused: ${status}`);
  return performance.now() - t0;
}

parentPort!.on('message', ({ url, issues }: { url: string; issues: number[] }) => {
  // All built, signed and connected first: preparing the 200th must not count in the first one's latency.
  const target = new URL(url);
  const built = issues.map((i) => requestBytes(target, build(i)));
  const warmUp = Buffer.from(`GET / HTTP/1.1\r\nhost: ${target.host}\r\nconnection: keep-alive\r\n\r\n`);
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
