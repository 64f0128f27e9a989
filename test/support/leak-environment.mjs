// The jest environment of every project: Node's, plus a check that a suite leaves nothing running.
//
// Suites share their worker process. A server, socket, child process or referenced timer a suite leaves
// behind keeps that process alive after its last suite, and jest then kills it at the end of the run
// ("A worker process has failed to exit gracefully and has been force exited"), without saying which of
// the dozens of suites it ran was at fault. Here what keeps the process alive
// (process.getActiveResourcesInfo()) is counted before each suite and again after its teardown; what is
// still there beyond the count it started with, after a grace as long as jest's own before it kills a
// worker, fails that suite, naming the handles and where the suite's timers were set.
import NodeEnvironment from 'jest-environment-node';

/** Jest kills a worker that has not exited 500 ms after it was told to end. */
export const GRACE_MS = 500;
/** Kinds of resource that keep a process alive for good (requests such as a file read end by themselves). */
const LASTING = new Set([
  'Timeout',
  'TCPSocketWrap',
  'TCPServerWrap',
  'PipeWrap',
  'PipeServerWrap',
  'ProcessWrap',
  'UDPWrap',
  'FSEventWrap',
  'StatWatcher',
  'SignalWrap',
  'MessagePort',
  'Worker',
]);

/** How many of each lasting kind keep the process alive now. */
export function lasting() {
  const counts = new Map();
  for (const kind of process.getActiveResourcesInfo())
    if (LASTING.has(kind)) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** The kinds of which there are more now than in `before` ("2 × Timeout"), empty when none. */
export function beyond(before, now = lasting()) {
  return [...now]
    .filter(([kind, n]) => n > (before.get(kind) ?? 0))
    .map(([kind, n]) => `${n - (before.get(kind) ?? 0)} × ${kind}`);
}

/** A handle as a reader can find it in the suite: what it connects, listens on or runs. */
function describe(handle) {
  const name = handle?.constructor?.name ?? typeof handle;
  if (typeof handle?.spawnargs === 'object')
    return `${name} pid ${handle.pid}: ${handle.spawnargs.join(' ')}`;
  if (typeof handle?.address === 'function' && handle.listening !== undefined)
    return `${name} listening on ${JSON.stringify(handle.address())}`;
  if (handle?.remotePort !== undefined)
    return `${name} ${handle.localAddress}:${handle.localPort} -> ${handle.remoteAddress}:${handle.remotePort}`;
  if (typeof handle?.fd === 'number') return `${name} fd ${handle.fd}`;
  return name;
}

export default class LeakCheckEnvironment extends NodeEnvironment.default {
  constructor(config, context) {
    super(config, context);
    this.timers = new Set();
    // Where the suite's own code (and the product code it imports) set each timer: named when one is left.
    for (const fn of ['setTimeout', 'setInterval']) {
      const original = this.global[fn];
      const timers = this.timers;
      this.global[fn] = Object.assign(function (...args) {
        const timer = original.apply(this, args);
        if (timers.size > 5000) for (const t of timers) if (t.timer._destroyed) timers.delete(t);
        timers.add({ timer, set: new Error(fn) });
        return timer;
      }, original);
    }
  }

  async setup() {
    // Jest's node:process module reads every property of process in the first ESM suite of a process,
    // which opens stdin, stdout and stderr for the rest of its life: opened here, they are in every count.
    void [process.stdin, process.stdout, process.stderr];
    this.before = lasting();
    this.handles = new Set(process._getActiveHandles());
    await super.setup();
  }

  async teardown() {
    if (this.tornDown) return;
    this.tornDown = true;
    await super.teardown();
    const deadline = Date.now() + GRACE_MS;
    while (beyond(this.before).length > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20).unref());
    const left = beyond(this.before);
    if (left.length === 0) return;
    const handles = process._getActiveHandles().filter((h) => !this.handles.has(h));
    const timers = [...this.timers]
      .filter(({ timer }) => !timer._destroyed && timer.hasRef())
      .map(({ set }) => set.stack.split('\n').slice(2, 7).join('\n'));
    throw new Error(
      [
        `the suite left ${left.join(', ')} keeping its worker alive ${GRACE_MS} ms after its teardown`,
        '(jest force-exits such a worker at the end of the run); close, kill or clear them in the suite:',
        ...handles.map((h) => `  ${describe(h)}`),
        ...timers.map((t) => `  timer set\n${t}`),
      ].join('\n'),
    );
  }
}
