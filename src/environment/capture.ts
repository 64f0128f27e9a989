import { Writable, type Readable } from 'node:stream';

/** What one capped stream produced. `bytes` counts everything, also the part that was dropped. */
export interface CapturedOutput {
  text: string;
  bytes: number;
  truncated: boolean;
}

/**
 * Keeps the first and the last `maxBytes / 2` of a byte stream and only counts the middle, so a test
 * that prints gigabytes cannot exhaust host memory and the runner's closing lines (the verdict) still
 * arrive. Shared by the local and Docker sandboxes.
 */
export class OutputCapture {
  private readonly head: Buffer[] = [];
  private tail: Buffer[] = [];
  private headBytes = 0;
  private tailBytes = 0;
  private total = 0;
  private readonly headMax: number;
  private readonly tailMax: number;

  constructor(readonly maxBytes: number) {
    this.headMax = Math.ceil(maxBytes / 2);
    this.tailMax = maxBytes - this.headMax;
  }

  push(chunk: Buffer | string): void {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.total += buf.length;
    const room = this.headMax - this.headBytes;
    if (room > 0) {
      const part = buf.subarray(0, room);
      this.head.push(part);
      this.headBytes += part.length;
      buf = buf.subarray(part.length);
    }
    if (buf.length === 0 || this.tailMax === 0) return;
    this.tail.push(buf.length > this.tailMax ? buf.subarray(buf.length - this.tailMax) : buf);
    this.tailBytes += Math.min(buf.length, this.tailMax);
    // Drop whole chunks, then part of the first, until only the last tailMax bytes are held.
    while (this.tailBytes - this.tail[0]!.length >= this.tailMax) this.tailBytes -= this.tail.shift()!.length;
    const excess = this.tailBytes - this.tailMax;
    if (excess > 0) {
      this.tail[0] = this.tail[0]!.subarray(excess);
      this.tailBytes -= excess;
    }
  }

  /** A sink for APIs that write into a stream (e.g. Docker's demultiplexer). */
  writable(): Writable {
    return new Writable({
      write: (chunk: Buffer | string, _enc, done) => {
        this.push(chunk);
        done();
      },
    });
  }

  get truncated(): boolean {
    return this.total > this.headBytes + this.tailBytes;
  }

  result(): CapturedOutput {
    const head = Buffer.concat(this.head, this.headBytes);
    const tail = Buffer.concat(this.tail, this.tailBytes);
    if (!this.truncated)
      return { text: Buffer.concat([head, tail]).toString('utf8'), bytes: this.total, truncated: false };
    // Cut at character boundaries: a split multi-byte sequence would decode as garbage.
    const h = head.subarray(0, utf8Boundary(head));
    let from = 0;
    while (from < tail.length && from < 4 && ((tail[from] ?? 0) & 0xc0) === 0x80) from++;
    const t = tail.subarray(from);
    const dropped = this.total - h.length - t.length;
    return {
      text: `${h.toString('utf8')}\n[... ${dropped} bytes truncated ...]${t.length ? `\n${t.toString('utf8')}` : ''}`,
      bytes: this.total,
      truncated: true,
    };
  }
}

/** Reads a whole stream through an OutputCapture; resolves when the stream ends or closes. */
export function captureStream(stream: Readable, maxBytes: number): Promise<CapturedOutput> {
  const cap = new OutputCapture(maxBytes);
  return new Promise((resolve) => {
    const finish = () => resolve(cap.result());
    stream.on('data', (c: Buffer | string) => cap.push(c));
    stream.once('end', finish);
    stream.once('close', finish);
    // A broken pipe still yields what was read so far; the caller reports the process outcome.
    stream.once('error', finish);
  });
}

function utf8Boundary(buf: Buffer): number {
  let end = buf.length;
  // Step back over continuation bytes (10xxxxxx) to the start of the last character…
  let i = end - 1;
  while (i >= 0 && end - i < 4 && ((buf[i] ?? 0) & 0xc0) === 0x80) i--;
  if (i < 0) return end;
  const lead = buf[i] ?? 0;
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  // …and drop that character if it is incomplete.
  if (end - i < need) end = i;
  return end;
}
