import { connect } from 'node:net';
import { needService, serviceUrl } from '../../support/services.js';
import { itIf } from '../../support/skip.js';

/** Writes `request` to host:port and resolves with the first bytes answered. */
function exchange(url: URL, defaultPort: number, request: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port || defaultPort), url.hostname, () => socket.write(request));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data);
    });
    socket.once('error', reject);
  });
}

// The services scripts/setup-services.sh starts answer on the URLs it exports; later suites build on them.
const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');
const database = serviceUrl('AGENTICFIX_TEST_DATABASE_URL');

itIf(needService('AGENTICFIX_TEST_REDIS_URL'))(
  'Redis answers PING on AGENTICFIX_TEST_REDIS_URL',
  async () => {
    const reply = await exchange(redis!, 6379, Buffer.from('PING\r\n'));
    expect(reply.toString()).toBe('+PONG\r\n');
  },
);

itIf(needService('AGENTICFIX_TEST_DATABASE_URL'))(
  'PostgreSQL answers the protocol on AGENTICFIX_TEST_DATABASE_URL',
  async () => {
    // SSLRequest (length 8, code 80877103): a PostgreSQL server answers one byte, S or N.
    const request = Buffer.alloc(8);
    request.writeInt32BE(8, 0);
    request.writeInt32BE(80877103, 4);
    const reply = await exchange(database!, 5432, request);
    expect(['S', 'N']).toContain(reply.subarray(0, 1).toString());
    expect(database!.pathname).toBe('/agenticfix');
  },
);
