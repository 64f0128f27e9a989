import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The process's Prometheus metrics (`/metrics` on serve and on workers). One registry per process:
 * counters are incremented where things happen; the run gauges are read from the run store at scrape.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'agenticfix_' });

const registers = [registry];
const SECONDS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600];

export const metrics = {
  deliveries: new Counter({
    name: 'agenticfix_webhook_deliveries_total',
    help: 'Webhook deliveries answered, by event and outcome (new, seen, replay, ignored, refused)',
    labelNames: ['event', 'outcome'],
    registers,
  }),
  webhookBodyBytes: new Gauge({
    name: 'agenticfix_webhook_body_bytes',
    help: 'Bytes of webhook bodies being received or checked now, all connections together',
    registers,
  }),
  runsEnded: new Counter({
    name: 'agenticfix_runs_ended_total',
    help: 'Runs that reached a final state, by state and verdict',
    labelNames: ['state', 'verdict'],
    registers,
  }),
  runSeconds: new Histogram({
    name: 'agenticfix_run_duration_seconds',
    help: "Runs' agent time (model setup to patch export) on this process, by stop reason",
    labelNames: ['stop_reason'],
    buckets: SECONDS,
    registers,
  }),
  phaseSeconds: new Histogram({
    name: 'agenticfix_run_phase_seconds',
    help: 'Time of each phase of the runs on this process',
    labelNames: ['phase'],
    buckets: SECONDS,
    registers,
  }),
  tokens: new Counter({
    name: 'agenticfix_model_tokens_total',
    help: 'Model tokens used by the runs on this process, as the service reported them',
    labelNames: ['kind'],
    registers,
  }),
};

/** Run counts by state as the store holds them (the queue's depth is `queued`). */
export type RunCounts = () => Promise<Record<'queued' | 'running' | 'publish_pending', number>>;

let counts: RunCounts | null = null;
/** The store the run gauges read at scrape (the listener's process has one). */
export function countRunsWith(source: RunCounts | null): void {
  counts = source;
}

new Gauge({
  name: 'agenticfix_runs',
  help: 'Runs in the store that are queued, running or waiting to be published again',
  labelNames: ['state'],
  registers,
  async collect() {
    this.reset();
    if (!counts) return;
    for (const [state, n] of Object.entries(await counts())) this.set({ state }, n);
  },
});
new Gauge({
  name: 'agenticfix_queue_depth',
  help: 'Runs waiting to be taken',
  registers,
  async collect() {
    this.reset();
    if (counts) this.set((await counts()).queued);
  },
});
