import { connect as netConnect, type Socket } from 'node:net';

/**
 * HTTP/1.1 on a raw kept-alive connection: requests written as prebuilt bytes, answers read by hand.
 * node:http's client costs ~0.2 ms a request on its thread, which a 200-delivery burst measured as the
 * sender's own latency; and a test can say exactly which connection a request travels on.
 */
export interface Connection {
  socket: Socket;
  /** Writes a request's bytes; resolves with the answer's status once the whole answer has arrived. */
  send(bytes: Buffer): Promise<number>;
}

export function connect(url: URL): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(Number(url.port), url.hostname);
    socket.setNoDelay(true);
    socket.once('error', reject);
    socket.once('connect', () => {
      // An error between requests shows as a closed connection on the next send.
      socket.off('error', reject).on('error', () => {});
      resolve({ socket, send: (bytes) => exchange(socket, bytes) });
    });
  });
}

/** A POST of `body` to `url` on a kept-alive connection, as the bytes to write. */
export function postBytes(
  url: URL,
  { body, headers }: { body: string; headers: Record<string, string> },
): Buffer {
  const lines = [`POST ${url.pathname} HTTP/1.1`, `host: ${url.host}`, 'connection: keep-alive'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  lines.push(`content-length: ${Buffer.byteLength(body)}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

function exchange(socket: Socket, bytes: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return reject(new Error('the connection is closed'));
    let got = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const status = complete(got);
      if (status === null) return;
      socket.off('data', onData).off('close', onClose);
      resolve(status);
    };
    const onClose = () => {
      socket.off('data', onData);
      reject(new Error(`the connection closed before a whole answer (${got.length} bytes of it)`));
    };
    socket.on('data', onData).once('close', onClose);
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
