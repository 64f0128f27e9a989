import { jest } from '@jest/globals';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Connections } from '../../../src/queue/redis-keys.js';
import { OutageLog } from '../../../src/trace/outage.js';
import { needService, serviceUrl } from '../../support/services.js';
import { describeIf } from '../../support/skip.js';
import { until } from '../../support/queue-contract.js';

const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');

/**
 * Issue 38, item 3: a Redis outage printed ioredis's "Unhandled error event" stack trace per connection
 * per retry. Here Redis is reached through a relay the test stops and starts again: the outage is one
 * line, its end another, and ioredis prints nothing.
 */
describeIf(needService('AGENTICFIX_TEST_REDIS_URL'))('a Redis outage', () => {
  let relay: Server | null = null;
  const sockets = new Set<Socket>();
  const startRelay = (port: number) =>
    new Promise<void>((resolve) => {
      relay = createServer((client) => {
        const upstream = connect(Number(redis!.port || 6379), redis!.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('error', () => s.destroy());
          s.on('close', () => sockets.delete(s));
        }
        client.pipe(upstream).pipe(client);
      }).listen(port, '127.0.0.1', resolve);
    });
  const stopRelay = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => relay!.close(resolve));
  };

  it('is one log line, and its end another, whatever the connections and retries', async () => {
    await startRelay(0);
    const port = (relay!.address() as { port: number }).port;
    const lines: [string, string, object][] = [];
    const log = {
      warn: (obj: object, msg: string) => lines.push(['warn', msg, obj]),
      info: (obj: object, msg: string) => lines.push(['info', msg, obj]),
    };
    const printed = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    const url = new URL(redis!.toString());
    url.hostname = '127.0.0.1';
    url.port = String(port);
    const connections = new Connections(url.toString(), new OutageLog('redis', log));
    try {
      const clients = [connections.open(), connections.open(), connections.open()];
      await Promise.all(clients.map((c) => c.ping()));
      await stopRelay();
      await until('the outage noticed', () => lines.length > 0, 10_000);
      await new Promise((r) => setTimeout(r, 1500)); // several reconnection attempts per connection
      await startRelay(port);
      await until('the recovery noticed', () => lines.length > 1, 20_000);
      await Promise.all(clients.map((c) => c.ping()));
      expect(lines).toEqual([
        ['warn', 'redis unreachable', { service: 'redis', error: expect.any(String) }],
        ['info', 'redis reachable again', { service: 'redis', down_s: expect.any(Number) }],
      ]);
      expect(printed.mock.calls.map((c) => String(c[0]))).toEqual([]);
    } finally {
      printed.mockRestore();
      connections.close();
      if (relay) await stopRelay().catch(() => undefined);
    }
  }, 60_000);
});
