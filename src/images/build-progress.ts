import type { Readable } from 'node:stream';
import { z } from 'zod';
import { BuildStepFilter } from './build-ca.js';
import { BuildLogCompactor } from './buildlog.js';

/** Reading an image build's progress stream from the engine, in bounded memory, into the log the model reads. */

/** One entry of the Engine's build progress stream (other fields, such as progress bars, are dropped). */
const BuildEvent = z.object({
  stream: z.string().optional(),
  status: z.string().optional(),
  error: z.string().optional(),
  errorDetail: z.object({ message: z.string().optional() }).optional(),
});
type BuildEvent = z.infer<typeof BuildEvent>;

/** Longest progress entry accepted: the engine sends a container's output in chunks of at most 32 KiB. */
const MAX_EVENT_BYTES = 1024 * 1024;
/** Longest error message kept from the engine. */
const MAX_ERROR_CHARS = 2000;
const MiB = 1024 * 1024;

export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
export const capped = (text: string) =>
  text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;

/**
 * Reads the engine's progress stream, one JSON entry per line, in bounded memory. (dockerode's
 * followProgress keeps every entry, so a noisy build exhausts memory, and a line that is not JSON
 * throws from its stream handler, which ends the process.) Resolves when the stream ends; rejects
 * on a stream error, an unreadable entry, or once more than `maxBytes` have arrived.
 */
export function readProgress(
  stream: Readable,
  maxBytes: number,
  onEvent: (ev: BuildEvent) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    /** The unfinished entry, as copies of the ends of chunks (a view would keep a whole chunk alive). */
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let bytes = 0;
    let done = false;
    const finish = (err?: unknown) => {
      if (done) return;
      done = true;
      stream.off('data', onData);
      if (err === undefined) return resolve();
      stream.destroy();
      reject(err instanceof Error ? err : new Error(String(err)));
    };
    const entry = (line: string) => {
      let json: unknown;
      try {
        json = JSON.parse(line);
      } catch {
        throw new Error(`the engine sent an unreadable progress entry: ${line.slice(0, 200)}`);
      }
      const ev = BuildEvent.safeParse(json);
      if (!ev.success) throw new Error(`the engine sent an unexpected progress entry: ${line.slice(0, 200)}`);
      onEvent(ev.data);
    };
    const onData = (chunk: Buffer | string) => {
      try {
        const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        bytes += buf.length;
        if (bytes > maxBytes) throw new BuildOutputCap(maxBytes);
        // Only the new chunk is searched: an entry split over many chunks costs no rescans.
        let from = 0;
        for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10, from)) {
          const part = buf.subarray(from, nl);
          const line = (pending.length > 0 ? Buffer.concat([...pending, part]) : part)
            .toString('utf8')
            .trim();
          pending = [];
          pendingBytes = 0;
          from = nl + 1;
          if (line !== '') entry(line);
        }
        if (from < buf.length) {
          pending.push(Buffer.from(buf.subarray(from)));
          pendingBytes += buf.length - from;
        }
        if (pendingBytes > MAX_EVENT_BYTES) throw new Error('the engine sent a progress entry over 1 MiB');
      } catch (err) {
        finish(err);
      }
    };
    stream.on('data', onData);
    // Stays attached: an error after the end (or after an abort) must not become an uncaught one.
    stream.on('error', (err) => finish(new Error(`the build stream broke off: ${err.message}`)));
    stream.once('end', () => finish());
    stream.once('close', () => finish());
  });
}

/** The build printed more than the configured cap. */
class BuildOutputCap extends Error {
  constructor(maxBytes: number) {
    super(
      `build output cap: the build printed more than ${Math.round(maxBytes / MiB)} MiB (AGENTICFIX_BUILD_MAX_OUTPUT_MB); make its steps quieter (e.g. apt-get -qq, pip -q, npm --silent)`,
    );
  }
}

/** What one build printed, as the model reads it, and how it ended. */
export interface BuildOutput {
  log: BuildLogCompactor;
  /** The engine's first error entry, or why reading stopped (output cap, broken stream); null when neither. */
  error: string | null;
  /** The classic builder keeps each finished step as an image; after a failure the last one is dangling and unlabelled. */
  lastLayer: string | null;
}

/**
 * Reads a build's progress stream into a compact log (see readProgress): the steps the app `added`
 * are hidden. Never rejects: a broken stream or the output cap becomes the error.
 */
export async function readBuildOutput(
  stream: Readable,
  maxBytes: number,
  added: number,
  /** Each step line of the model's Dockerfile, as the log shows it. */
  onStep: (line: string) => void = () => undefined,
): Promise<BuildOutput> {
  const out: BuildOutput = { log: new BuildLogCompactor(), error: null, lastLayer: null };
  const steps = new BuildStepFilter(added);
  // After what the filter still holds; the newline ends an unterminated output line.
  const fail = (e: string) => out.log.write(`${steps.end()}\nERROR: ${e}\n`);
  try {
    await readProgress(stream, maxBytes, (ev) => {
      if (ev.stream) {
        const text = steps.write(ev.stream);
        out.log.write(text);
        for (const m of text.matchAll(/^Step \d+\/\d+ : .*$/gm)) onStep(m[0]);
        for (const m of ev.stream.matchAll(/^ ---> ([0-9a-f]{12,64})\s*$/gm)) out.lastLayer = m[1] ?? null;
      } else if (ev.status) out.log.write(`${ev.status}\n`);
      const e = ev.error ?? ev.errorDetail?.message;
      if (e) {
        out.error ??= capped(e);
        fail(e);
      }
    });
  } catch (err) {
    if (err instanceof BuildOutputCap) fail(err.message);
    out.error ??= capped(message(err));
  } finally {
    out.log.write(steps.end());
  }
  return out;
}
