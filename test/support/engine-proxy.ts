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
}

export async function startEngineProxy(dir: string, engine = '/var/run/docker.sock'): Promise<EngineProxy> {
  const file = path.join(dir, 'engine-proxy.sock');
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection(engine);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, resolve);
  });
  let closed: Promise<void> | null = null;
  return {
    host: `unix://${file}`,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of open) s.destroy();
      }).finally(() => rmSync(file, { force: true }))),
  };
}
