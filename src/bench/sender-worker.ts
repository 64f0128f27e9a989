import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
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

/**
 * Connections opened before the clock starts and kept: a burst measures answering, not 200 TCP
 * handshakes queued on both ends (GitHub's deliveries come from many machines, not one socket pool).
 */
const agent = new Agent({ keepAlive: true, maxFreeSockets: 1024 });

function warm(url: string, n: number): Promise<unknown> {
  const one = () =>
    new Promise<void>((resolve, reject) =>
      request(url, { method: 'GET', agent }, (res) => res.resume().on('end', resolve))
        .on('error', reject)
        .end(),
    );
  return Promise.all(Array.from({ length: n }, one));
}

async function deliver(url: string, { body, headers }: ReturnType<typeof build>): Promise<number> {
  const t0 = performance.now();
  // node:http, not fetch: fetch's own cost per request would be counted as the app's latency.
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(url, { method: 'POST', headers, agent }, (res) => {
      res.resume().on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
  if (status >= 300) throw new Error(`delivery refused: ${status}`);
  return performance.now() - t0;
}

parentPort!.on('message', ({ url, issues }: { url: string; issues: number[] }) => {
  // All built and signed first: building the 200th must not count in the first one's latency.
  const built = issues.map(build);
  warm(url, issues.length)
    .then(() => Promise.all(built.map((d) => deliver(url, d))))
    .then(
      (ms) => parentPort!.postMessage({ ms }),
      (err: unknown) => parentPort!.postMessage({ error: String(err) }),
    );
});
