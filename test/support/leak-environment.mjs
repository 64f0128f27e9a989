// The jest environment of every project: Node's, plus a check that a suite leaves nothing running.
//
// Suites share their worker process. A server, socket, child process or referenced timer a suite leaves
// behind keeps that process alive after its last suite, and jest then kills it at the end of the run
// ("A worker process has failed to exit gracefully and has been force exited"), without saying which of
// the dozens of suites it ran was at fault. Here what keeps the process alive
// (process.getActiveResourcesInfo()) is counted before each suite and again after its teardown; what is
// still there beyond the count it started with, after a grace as long as jest's own before it kills a
// worker, fails that suite, naming the handles and where the suite's timers were set.
//
// With `testEnvironmentOptions: { containers: true }` (the projects that use the Docker engine), a
// container labelled by the app (`agenticfix=1`) that the suite's process or a process it started owns
// (its `agenticfix.owner` label) and that is still there after the teardown fails the suite too, and is
// removed: it would hold a run's worktree, memory and CPU for the rest of the run, and a later start-up
// sweep would take it for a dead app's.
//
// A suite whose check fails loses its tests' results (jest reports only the failure of its environment),
// so the tests that failed are named in the check's message: a leak often follows a test that failed
// before it could close what it opened.
import { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { hostname } from 'node:os';
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

/** How long a suite's containers may take to go after its teardown (removal is asynchronous). */
export const CONTAINER_GRACE_MS = 3000;
/** The label on everything the app creates in the engine (src/environment/containers.ts LABEL). */
const LABEL = 'agenticfix';
const OWNER_LABEL = 'agenticfix.owner';
const RUN_LABEL = 'agenticfix.run';

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

/** A GET of the Docker engine's API (DOCKER_HOST or its socket), on a connection of its own that ends with it. */
function engine(method, api) {
  const host = process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
  const where = host.startsWith('unix://')
    ? { socketPath: host.slice('unix://'.length) }
    : {
        host: new URL(host.replace(/^tcp:/, 'http:')).hostname,
        port: new URL(host.replace(/^tcp:/, 'http:')).port,
      };
  return new Promise((resolve, reject) => {
    const req = http.request({ ...where, method, path: api, agent: false }, (res) => {
      const body = [];
      res.on('data', (d) => body.push(d));
      res.on('end', () => {
        const text = Buffer.concat(body).toString();
        if ((res.statusCode ?? 500) >= 400)
          reject(new Error(`engine ${method} ${api}: ${res.statusCode} ${text}`));
        else resolve(text ? JSON.parse(text) : null);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The parent of `pid`, or null when it is gone. */
function parentOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

/** Whether the container's owner (`host:pid:ticks`) is one of `pids`, or a live descendant of one. */
function ownedBy(container, pids) {
  const m = /^(.*):(\d+):\d+$/.exec(container.Labels?.[OWNER_LABEL] ?? '');
  if (!m || m[1] !== hostname()) return false;
  for (let pid = Number(m[2]), hops = 0; pid > 1 && hops < 32; pid = parentOf(pid) ?? 0, hops++)
    if (pids.has(pid)) return true;
  return false;
}

/** The app's containers that the suite's processes own, as `docker ps` shows them. */
async function suiteContainers(pids) {
  const filters = encodeURIComponent(JSON.stringify({ label: [`${LABEL}=1`] }));
  const list = await engine('GET', `/containers/json?all=1&filters=${filters}`);
  return list.filter((c) => ownedBy(c, pids));
}

/** A test's name with its describe blocks, as jest prints it. */
function fullName(test) {
  const names = [];
  for (let t = test; t && t.parent; t = t.parent) names.unshift(t.name);
  return names.join(' › ');
}

export default class LeakCheckEnvironment extends NodeEnvironment.default {
  constructor(config, context) {
    super(config, context);
    this.containers = config.projectConfig.testEnvironmentOptions?.containers === true;
    /** The tests (and hooks) that failed: named when the check fails, since jest then drops their results. */
    this.failures = [];
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
    if (this.containers) {
      // Every process the suite starts (spawn, exec, fork, execa all start a ChildProcess): whose
      // containers are the suite's.
      const pids = (this.pids = new Set([process.pid]));
      const spawn = (this.spawn = ChildProcess.prototype.spawn);
      ChildProcess.prototype.spawn = function (...args) {
        const result = spawn.apply(this, args);
        if (this.pid) pids.add(this.pid);
        return result;
      };
    }
    await super.setup();
  }

  handleTestEvent(event) {
    if (event.name === 'test_done' && event.test.errors.length > 0)
      this.failures.push(`${fullName(event.test)}: ${firstLine(event.test.errors[0])}`);
    if (event.name === 'hook_failure')
      this.failures.push(`${event.hook.type} hook: ${firstLine(event.error)}`);
  }

  async teardown() {
    if (this.tornDown) return;
    this.tornDown = true;
    if (this.spawn) ChildProcess.prototype.spawn = this.spawn;
    await super.teardown();
    const problems = [...(await this.handlesLeft()), ...(this.containers ? await this.containersLeft() : [])];
    if (problems.length === 0) return;
    if (this.failures.length > 0)
      problems.push(
        'jest reports this instead of the tests, which failed before it:',
        ...this.failures.map((f) => `  ${f}`),
      );
    throw new Error(problems.join('\n'));
  }

  /** What keeps the worker alive beyond the suite's start, after GRACE_MS: lines saying what and where. */
  async handlesLeft() {
    const deadline = Date.now() + GRACE_MS;
    while (beyond(this.before).length > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20).unref());
    const left = beyond(this.before);
    if (left.length === 0) return [];
    const handles = process._getActiveHandles().filter((h) => !this.handles.has(h));
    const timers = [...this.timers]
      .filter(({ timer }) => !timer._destroyed && timer.hasRef())
      .map(({ set }) => set.stack.split('\n').slice(2, 7).join('\n'));
    return [
      `the suite left ${left.join(', ')} keeping its worker alive ${GRACE_MS} ms after its teardown`,
      '(jest force-exits such a worker at the end of the run); close, kill or clear them in the suite:',
      ...handles.map((h) => `  ${describe(h)}`),
      ...timers.map((t) => `  timer set\n${t}`),
    ];
  }

  /** The suite's containers still there after CONTAINER_GRACE_MS, removed: lines naming them. */
  async containersLeft() {
    const deadline = Date.now() + CONTAINER_GRACE_MS;
    let left = await suiteContainers(this.pids);
    while (left.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250).unref());
      left = await suiteContainers(this.pids);
    }
    if (left.length === 0) return [];
    for (const c of left) await engine('DELETE', `/containers/${c.Id}?force=1&v=1`).catch(() => undefined);
    return [
      `the suite left ${left.length} of the app's containers ${CONTAINER_GRACE_MS} ms after its teardown`,
      '(removed now); stop the runs, close the sandboxes or remove them in the suite (one made for a run',
      "of an earlier suite in this worker, an image lease it renews, is that suite's: release its builders):",
      ...left.map(
        (c) =>
          `  ${c.Id.slice(0, 12)} ${c.Image} ${c.State}, run ${c.Labels[RUN_LABEL]}, owner ${c.Labels[OWNER_LABEL]}`,
      ),
    ];
  }
}

/** The first line of a test's error (jest keeps [error, its async stack] pairs, or the error). */
function firstLine(error) {
  const e = Array.isArray(error) ? error[0] : error;
  return String(e?.message ?? e).split('\n')[0];
}
