import { rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import path from 'node:path';

/**
 * A unix-socket proxy to the shared Docker engine that a test can close: the engine "goes away" for
 * whatever talks to it through the proxy (DOCKER_HOST=unix://<path>), while the engine itself, shared
 * by every test and helper, is never touched.
 */
export interface EngineProxy {
  /** `unix://…`, for DOCKER_HOST. */
  host: string;
  /** Closes the socket and cuts every connection through it (requests in flight included). */
  close(): Promise<void>;
  /** From now on, the next request matching `closeOn` closes the proxy (`hangOn`: hangs the engine). */
  arm(): void;
}

/** A request to the engine's `/_ping`, which a hung engine still answers. */
const PING = /^(GET|HEAD) \S*\/_ping /;

/**
 * `closeOn`: once armed, the proxy closes itself `afterMs` after a request matching it passed (a request
 * line such as `POST /v1.47/containers/<id>/wait`), whatever the machine's load.
 * `hangOn`: once armed, `afterMs` after a request matching it passed, the engine hangs as a deadlocked
 * dockerd does: that connection goes silent both ways and every later request but a ping gets no answer.
 */
export async function startEngineProxy(
  dir: string,
  o: { closeOn?: RegExp; hangOn?: RegExp; afterMs?: number } = {},
  engine = '/var/run/docker.sock',
): Promise<EngineProxy> {
  const file = path.join(dir, 'engine-proxy.sock');
  const open = new Set<Socket>();
  let proxy: EngineProxy | null = null;
  let armed = false;
  let hung = false;
  const server = createServer((client) => {
    const upstream = createConnection(engine);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    let silent = false;
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      if (armed && o.closeOn?.test(text)) setTimeout(() => void proxy?.close(), o.afterMs ?? 0);
      if (hung && !PING.test(text)) silent = true;
      if (armed && !hung && o.hangOn?.test(text)) setTimeout(() => (hung = silent = true), o.afterMs ?? 0);
      if (!silent) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => void (silent || client.write(chunk)));
    client.on('end', () => upstream.end());
    upstream.on('end', () => void (silent || client.end()));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, resolve);
  });
  let closed: Promise<void> | null = null;
  return (proxy = {
    host: `unix://${file}`,
    arm: () => void (armed = true),
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of open) s.destroy();
      }).finally(() => rmSync(file, { force: true }))),
  });
}
