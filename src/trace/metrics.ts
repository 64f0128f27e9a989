import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The process's Prometheus metrics (`/metrics` on serve and on workers). One registry per process:
 * counters are incremented where things happen; the run gauges are read from the run store at scrape.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'agenticfix_' });

const registers = [registry];
const SECONDS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600];

/**
 * The webhook endpoint's figures, kept here as plain numbers and handed to their metrics at scrape:
 * prom-client's `inc` and `set` hash their labels on every call, a few µs of each delivery's answer.
 * `held`: bytes of webhook bodies held now, all endpoints together; `counted`: deliveries answered
 * since the last scrape, by event and outcome (both bounded sets).
 */
export const webhookFigures = {
  held: 0,
  counted: new Map<string, { event: string; outcome: string; n: number }>(),
  count(event: string, outcome: string): void {
    const key = `${event} ${outcome}`;
    const c = this.counted.get(key);
    if (c) c.n++;
    else this.counted.set(key, { event, outcome, n: 1 });
  },
};

export const metrics = {
  deliveries: new Counter({
    name: 'agenticfix_webhook_deliveries_total',
    help: 'Webhook deliveries answered, by event and outcome (new, seen, replay, ignored, refused)',
    labelNames: ['event', 'outcome'],
    registers,
    collect() {
      for (const c of webhookFigures.counted.values()) {
        if (c.n > 0) this.inc({ event: c.event, outcome: c.outcome }, c.n);
        c.n = 0;
      }
    },
  }),
  webhookBodyBytes: new Gauge({
    name: 'agenticfix_webhook_body_bytes',
    help: 'Bytes of webhook bodies being received or checked now, all connections together',
    registers,
    collect() {
      this.set(webhookFigures.held);
    },
  }),
  runsEnded: new Counter({
    name: 'agenticfix_runs_ended_total',
    help: 'Runs that reached a final state, by state, verdict and reason (stop reason; infra_error: its job threw; worker_died, app_restarted: interrupted)',
    labelNames: ['state', 'verdict', 'reason'],
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
    help: 'Time of each phase of the runs on this process (model_setup, workspace, environment, agent, patch_and_cleanup, judge, publish)',
    labelNames: ['phase'],
    buckets: SECONDS,
    registers,
  }),
  labelToPr: new Histogram({
    name: 'agenticfix_label_to_pr_seconds',
    help: 'From the run recorded (the label taken in) to its pull request opened, on the process that opened it',
    buckets: SECONDS,
    registers,
  }),
  cost: new Counter({
    name: 'agenticfix_cost_usd_total',
    help: "What the runs' model requests cost, in US dollars, by model (runs of a model without a price add nothing)",
    labelNames: ['model'],
    registers,
  }),
  tokens: new Counter({
    name: 'agenticfix_model_tokens_total',
    help: 'Model tokens used by the runs on this process, as the service reported them',
    labelNames: ['kind'],
    registers,
  }),
};

/** The release this process runs: one series, always 1 (join on it to see versions in a fleet). */
export function exportBuildInfo(info: { version: string; commit: string; node: string }): void {
  if (registry.getSingleMetric('agenticfix_build_info')) return;
  new Gauge({
    name: 'agenticfix_build_info',
    help: 'The version, commit and Node.js of this process; always 1',
    labelNames: ['version', 'commit', 'node'],
    registers,
  }).set(info, 1);
}

/** Run counts by state as the store holds them (the queue's depth is `queued`). */
export type RunCounts = () => Promise<Record<'queued' | 'running' | 'publish_pending', number>>;

let counts: RunCounts | null = null;
/**
 * The store-wide gauges (`agenticfix_runs`, `agenticfix_queue_depth`), read from the store at scrape.
 * Only the process serving the store exports them (serve): workers share that store, and a Grafana
 * `sum` over every process would count it once per process.
 */
export function exportRunCounts(source: RunCounts | null): void {
  counts = source;
  if (!source || registry.getSingleMetric('agenticfix_runs')) return;
  new Gauge({
    name: 'agenticfix_runs',
    help: 'Runs in the store that are queued, running or waiting to be published again (serve only)',
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
    help: 'Runs waiting to be taken (serve only)',
    registers,
    async collect() {
      this.reset();
      if (counts) this.set((await counts()).queued);
    },
  });
}
