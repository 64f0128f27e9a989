import { once } from 'node:events';
import net from 'node:net';

/**
 * Raw connections to a listener, for the connection limits every port of the app has (limitedServer):
 * a connection that trickles its headers is answered 408 and closed, one whose body does not arrive is
 * closed at the body deadline, one past the cap is closed unanswered. Each test starts its listener with
 * LIMITS (short deadlines, a cap of CAP) and calls itHasConnectionLimits.
 */

const CAP = 3;
export const LIMITS = { maxConnections: CAP, headersTimeoutMs: 1000, bodyTimeoutMs: 1000 };

interface RawConnection {
  socket: net.Socket;
  /** What the server sent on it. */
  got: () => string;
  /** Whether the server closed it. */
  closed: () => boolean;
}

function rawConnections(port: () => number) {
  const opened: net.Socket[] = [];
  async function connect(): Promise<RawConnection> {
    const socket = net.connect(port(), '127.0.0.1');
    opened.push(socket);
    let got = '';
    let closed = false;
    socket.on('data', (d) => (got += d.toString()));
    socket.on('error', () => {});
    socket.on('close', () => (closed = true));
    await once(socket, 'connect');
    return { socket, got: () => got, closed: () => closed };
  }
  return {
    destroyAll: () => opened.forEach((s) => s.destroy()),

    /** Sends the first lines of `GET path` and no more; the connection once the server closed it (or gave up). */
    async slowHeaders(path: string): Promise<RawConnection> {
      const slow = await connect();
      slow.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
      await until(slow.closed, 4000);
      return slow;
    },

    /**
     * Sends `GET path` whole but for the body its headers announce, a byte of it now and then; the
     * connection once the server closed it (or gave up).
     */
    async slowBody(path: string): Promise<RawConnection> {
      const slow = await connect();
      slow.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n`);
      const drip = setInterval(() => slow.socket.write('x'), 200);
      await until(slow.closed, 6000);
      clearInterval(drip);
      return slow;
    },

    /** CAP idle connections and one more; the idle ones and the extra once the server closed it (or gave up). */
    async pastCap(): Promise<{ idle: RawConnection[]; extra: RawConnection }> {
      const idle: RawConnection[] = [];
      for (let i = 0; i < CAP; i++) idle.push(await connect());
      const extra = await connect();
      await until(extra.closed, 2000);
      return { idle, extra };
    },
  };
}

/**
 * The two cases every listener's test asserts: a trickled request (to `path`) gets 408 and is closed at
 * the header deadline, and a connection past the cap is closed unanswered while `served` (what the
 * listener is for, asserting its answer) still gets through once one of the held connections closes.
 */
export function itHasConnectionLimits(o: {
  port: () => number;
  path: string;
  /** What gets through once a held connection closes, e.g. "a signed delivery". */
  what: string;
  served: () => Promise<void>;
}): void {
  const raw = rawConnections(o.port);
  afterEach(() => raw.destroyAll()); // before the listener closes (the file's afterAll)

  it('a connection that sends its headers slowly is answered 408 and closed at the header deadline', async () => {
    const slow = await raw.slowHeaders(o.path);
    expect(slow.closed()).toBe(true); // was: still open (Node's 60 s, checked every 30 s)
    expect(slow.got()).toMatch(/^HTTP\/1\.1 408/);
  });

  // Red team: the header deadline ended at the headers; a body (announced by Content-Length, sent a byte
  // at a time or not at all) kept its connection for Node's 5 min, answered or not, on any path: CAP such
  // connections shut everyone out, for free.
  it('a connection whose body does not arrive is closed at the body deadline', async () => {
    const slow = await raw.slowBody(o.path);
    expect(slow.closed()).toBe(true); // was: still open (Node's 300 s request deadline)
  });

  it(`connections past the cap are closed unanswered; ${o.what} gets through once one closes`, async () => {
    const { idle, extra } = await raw.pastCap();
    expect(extra.closed()).toBe(true); // was: held open like the others
    expect(extra.got()).toBe('');
    expect(idle.some((c) => c.closed())).toBe(false);
    idle[0]!.socket.destroy();
    await until(idle[0]!.closed, 2000);
    await o.served();
  });
}

const until = async (ok: () => boolean, ms: number) => {
  for (const end = Date.now() + ms; !ok() && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
};
