import { Writable, type Readable } from 'node:stream';

/** What one capped stream produced. `bytes` counts everything, also the part that was dropped. */
export interface CapturedOutput {
  text: string;
  bytes: number;
  truncated: boolean;
}

/**
 * Keeps the first `maxBytes` of a byte stream and only counts the rest, so a test that prints
 * gigabytes cannot exhaust host memory. Shared by the local and Docker sandboxes.
 */
export class OutputCapture {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private total = 0;

  constructor(readonly maxBytes: number) {}

  push(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.total += buf.length;
    const room = this.maxBytes - this.kept;
    if (room <= 0) return;
    const part = buf.length <= room ? buf : buf.subarray(0, room);
    this.chunks.push(part);
    this.kept += part.length;
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
    return this.total > this.kept;
  }

  result(): CapturedOutput {
    const buf = Buffer.concat(this.chunks, this.kept);
    const dropped = this.total - this.kept;
    // Cut at a character boundary: a split multi-byte sequence would decode as garbage.
    const text = (dropped > 0 ? buf.subarray(0, utf8Boundary(buf)) : buf).toString('utf8');
    return {
      text:
        dropped > 0 ? `${text}\n[... ${this.total - Buffer.byteLength(text)} more bytes truncated]` : text,
      bytes: this.total,
      truncated: dropped > 0,
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
