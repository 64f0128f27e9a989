import { attemptId, recordedAttempts, type Attempt } from '../pipeline/attempts.js';
import { isActive, type RunEvent, type RunRecord, type RunStore } from '../store/store.js';
import { html, type Html } from './html.js';
import { duration, table } from './layout.js';
import { repairSections, runFacts, section } from './run-page.js';

/**
 * A run's attempts on the run pages (pipeline/attempts.ts): the run's page lists them, and each has a
 * page of its own at /runs/<run>-a<n> with its events (stored under its id, as its run directory is),
 * linking back to its run and to its siblings. The store keeps no run record of an attempt: its run's
 * `attempts` column says what each one came to, and an attempt under way is known by its events.
 * Attempt fields are partly the model's doing (reasons, sizes) and are escaped like everything else.
 */

/** One attempt of a run: its outcome as recorded, or null while it is under way. */
export interface AttemptEntry {
  n: number;
  run_id: string;
  outcome: Attempt | null;
}

/**
 * The run's attempts: those recorded (one still `running` is under way), and those with events and no
 * record (just started, or stopped with their run before it recorded them: a worker that died).
 */
export async function attemptEntries(
  store: Pick<RunStore, 'events'>,
  run: RunRecord,
): Promise<AttemptEntry[]> {
  const recorded = recordedAttempts(run);
  const last = Math.max(0, ...recorded.map((a) => a.n));
  const entries: AttemptEntry[] = [];
  for (let n = 1; ; n++) {
    const a = recorded.find((r) => r.n === n);
    const id = attemptId(run.id, n);
    if (a) entries.push({ n, run_id: a.run_id, outcome: a.verdict === 'running' ? null : a });
    else if ((await store.events(id, 0, 1)).length > 0) entries.push({ n, run_id: id, outcome: null });
    else if (n > last) return entries;
  }
}

const href = (id: string) => `/runs/${encodeURIComponent(id)}`;
const num = (v: number | null) => (v === null ? '—' : String(v));
const cost = (a: Attempt) => (a.cost_usd === null ? '—' : `$${a.cost_usd.toFixed(4)}`);
const published = html` <span class="badge state-done">published</span>`;

/** The run page's table of attempts, each linking to its page. */
export function attemptsSection(entries: AttemptEntry[]): Html | null {
  if (entries.length === 0) return null;
  return section(
    `Attempts (${entries.length})`,
    html`<p class="muted">Each attempt is judged on its own; the smallest verified patch is published.</p>
      ${table(
        ['Attempt', 'Verdict', 'Model', 'F2P', 'P2P', 'Changed', 'Cost', 'Duration'],
        entries.map(({ n, run_id, outcome: a }) =>
          a
            ? html`<tr>
                <td><a href="${href(run_id)}">Attempt ${n}</a>${a.published ? published : ''}</td>
                <td>${a.verdict}</td>
                <td>${a.model ?? '—'}</td>
                <td>${num(a.f2p)}</td>
                <td>${num(a.p2p)}</td>
                <td>${a.changed_lines} lines, ${a.changed_files} files</td>
                <td>${cost(a)}</td>
                <td>${duration(a.duration_ms) || '—'}</td>
              </tr>`
            : html`<tr>
                <td><a href="${href(run_id)}">Attempt ${n}</a></td>
                <td colspan="7" class="muted">under way</td>
              </tr>`,
        ),
        'attempts',
      )}`,
  );
}

/** An attempt's page body (also what the live update swaps in): its run, its siblings, its work. */
export function attemptBody(o: {
  run: RunRecord;
  entry: AttemptEntry;
  siblings: AttemptEntry[];
  events: RunEvent[];
  githubUrl: string;
}): Html {
  const { run, entry, events } = o;
  const a = entry.outcome;
  const active = a === null && isActive(run.state);
  return html`<div
    id="run"
    data-run="${entry.run_id}"
    data-active="${active ? 'true' : 'false'}"
    data-seq="${events.at(-1)?.seq ?? 0}"
  >
    <h1>
      Attempt ${entry.n} of run <a href="${href(run.id)}"><code>${run.id}</code></a>
    </h1>
    <nav class="pages" aria-label="Attempts of this run">
      <a href="${href(run.id)}">← The run</a>
      ${o.siblings.map((s) =>
        s.n === entry.n
          ? html`<strong aria-current="page">Attempt ${s.n}</strong>`
          : html`<a href="${href(s.run_id)}">Attempt ${s.n}</a>`,
      )}
    </nav>
    <dl class="facts">
      ${runFacts(run, o.githubUrl)}
      <dt>Attempt</dt>
      <dd><code>${entry.run_id}</code>${a?.published ? published : ''}</dd>
      ${
        a
          ? html`<dt>Model</dt>
              <dd>${a.model ?? '—'}</dd>
              <dt>Verdict</dt>
              <dd>${a.verdict}: ${a.reason}</dd>
              <dt>Tests</dt>
              <dd>F2P ${num(a.f2p)}, P2P ${num(a.p2p)}</dd>
              <dt>Changed</dt>
              <dd>${a.changed_lines} lines, ${a.changed_files} files</dd>
              <dt>Cost</dt>
              <dd>${cost(a)}</dd>
              <dt>Duration</dt>
              <dd>${duration(a.duration_ms) || '—'}</dd>`
          : html`<dt>State</dt>
              <dd>${active ? 'under way' : `ended with its run (${run.state})`}</dd>`
      }
    </dl>
    ${active ? html`<p class="live" role="status" aria-live="polite">Live: this page updates as the attempt goes.</p>` : ''}
    ${repairSections(events, { calls: true })}
  </div>`;
}
