import { isActive, type RunEvent, type RunRecord } from '../store/store.js';
import { renderMarkdown as evidenceMarkdown } from '../verify/markdown.js';
import { VerificationReportSchema, type VerificationReport } from '../verify/types.js';
import { html, type Html } from './html.js';
import { duration, runDuration, spent, stateBadge, table } from './layout.js';
import { renderDiff, renderMarkdown } from './render.js';
import { num, obj, str, toolCall, type Body } from './tool-call.js';

/** Who looks at the page: writers see the cancel button. */
export interface Viewer {
  writer: boolean;
  csrf: string;
}

const time = (ts: string): Html => html`<time datetime="${ts}">${ts.slice(11, 19)}</time>`;

/** The run's page body (also what the live update swaps in). */
export function runBody(o: {
  run: RunRecord;
  events: RunEvent[];
  revisions: RunRecord[];
  /** Its attempts' section (null: a run of one); each one's work is on its own page (attempts-page.ts). */
  attempts: Html | null;
  viewer: Viewer;
  githubUrl: string;
}): Html {
  const { run, events } = o;
  const of = (type: string) => events.filter((e) => e.type === type);
  const active = isActive(run.state);
  return html`<div
    id="run"
    data-run="${run.id}"
    data-active="${active ? 'true' : 'false'}"
    data-seq="${events.at(-1)?.seq ?? 0}"
  >
    <h1>Run <code>${run.id}</code></h1>
    <dl class="facts">
      ${runFacts(run, o.githubUrl)}
      <dt>Trigger</dt>
      <dd>
        ${run.trigger} by ${run.triggered_by}${run.revision !== null ? ` (revision ${run.revision})` : ''}
      </dd>
      <dt>State</dt>
      <dd>${stateBadge(run.state)} ${run.stop_reason ?? ''}</dd>
      <dt>Verdict</dt>
      <dd>${run.verdict ?? '—'}</dd>
      <dt>Duration</dt>
      <dd>${duration(runDuration(run)) || '—'}</dd>
      <dt>Cost</dt>
      <dd>${spent(run) || '—'}</dd>
      ${
        run.pr_number !== null
          ? html`<dt>Pull request</dt>
              <dd>
                <a href="${o.githubUrl}/${run.owner}/${run.repo}/pull/${run.pr_number}">#${run.pr_number}</a>
              </dd>`
          : ''
      }
      ${
        run.error
          ? html`<dt>Error</dt>
              <dd><pre class="wrap">${run.error}</pre></dd>`
          : ''
      }
    </dl>
    ${active ? html`<p class="live" role="status" aria-live="polite">Live: this page updates as the run goes.</p>` : ''}
    ${
      active && o.viewer.writer
        ? html`<form method="post" action="/runs/${encodeURIComponent(run.id)}/cancel" class="cancel">
            <input type="hidden" name="csrf" value="${o.viewer.csrf}" />
            <button type="submit" class="danger">Cancel this run</button>
          </form>`
        : ''
    }
    ${o.attempts ?? ''} ${section('Timeline', timeline(of('status'), run))}
    ${section('Status history', statusHistory(of('status')))}
    ${repairSections(events, { calls: o.attempts === null })}
    ${o.revisions.length > 0 ? section('Revisions', revisions(o.revisions, run.id)) : ''}
  </div>`;
}

/** The run's repository and issue (or pull request), for its page and its attempts'. */
export function runFacts(run: RunRecord, githubUrl: string): Html {
  const ref = run.revision !== null && run.pr_number !== null ? run.pr_number : run.issue;
  return html`<dt>Repository</dt>
    <dd><a href="${githubUrl}/${run.owner}/${run.repo}">${run.owner}/${run.repo}</a></dd>
    <dt>${run.revision !== null ? 'Pull request' : 'Issue'}</dt>
    <dd>
      <a href="${githubUrl}/${run.owner}/${run.repo}/issues/${ref}">#${ref}</a> ${run.issue_title ?? ''}
    </dd>`;
}

/**
 * What a repair did, from its events: guidance, environment, tool calls and model requests (`calls`:
 * a run of several attempts has these on each attempt's page), summary, test evidence, diff, report.
 */
export function repairSections(events: RunEvent[], o: { calls: boolean }): Html {
  const of = (type: string) => events.filter((e) => e.type === type);
  const last = (type: string) => of(type).at(-1);
  const repair = last('repair_result')?.body;
  const parsed = VerificationReportSchema.safeParse(last('verification')?.body.report);
  const report = parsed.success ? parsed.data : null;
  return html`${guidance(last('repository_guidance'))} ${section('Environment', environment(events, repair))}
  ${o.calls ? section(`Tool calls (${of('tool_end').length})`, toolCalls(events)) : ''}
  ${o.calls ? section('Model requests', modelRequests(of('model_reply'))) : ''}
  ${repair && str(repair.summary) ? section("The model's summary", renderMarkdown(str(repair.summary)!)) : ''}
  ${section('Test evidence', report ? cells(report) : html`<p class="muted">Not judged yet.</p>`)}
  ${section('Final diff', repair ? renderDiff(str(repair.patch) ?? '') : html`<p class="muted">No patch yet.</p>`)}
  ${section("The judge's report", report ? renderMarkdown(evidenceMarkdown(report)) : html`<p class="muted">Not judged yet.</p>`)}`;
}

export const section = (title: string, body: Html): Html =>
  html`<section>
    <h2>${title}</h2>
    ${body}
  </section>`;

function timeline(statuses: RunEvent[], run: RunRecord): Html {
  if (statuses.length === 0) return html`<p class="muted">Nothing yet.</p>`;
  const end = run.finished_at ? Date.parse(run.finished_at) : Date.now();
  // Consecutive statuses of one phase are one step of the timeline.
  const steps = statuses.filter((s, i) => i === 0 || s.body.phase !== statuses[i - 1]!.body.phase);
  return html`<ol class="timeline">
    ${steps.map((s, i) => {
      const next = steps[i + 1];
      const until = next ? Date.parse(next.ts) : end;
      const current = !next && isActive(run.state);
      return html`<li class="${current ? 'current' : ''}">
        <span class="phase">${str(s.body.phase)}</span> ${time(s.ts)}
        <span class="muted">${current ? 'now' : duration(until - Date.parse(s.ts))}</span>
      </li>`;
    })}
  </ol>`;
}

function statusHistory(statuses: RunEvent[]): Html {
  if (statuses.length === 0) return html`<p class="muted">Nothing yet.</p>`;
  return html`<ul class="history">
    ${statuses.map(
      (s) =>
        html`<li>
          ${time(s.ts)}
          <strong>${str(s.body.phase)}</strong
          >${str(s.body.detail) ? html`<div class="md">${renderMarkdown(str(s.body.detail)!)}</div>` : ''}
        </li>`,
    )}
  </ul>`;
}

function guidance(ev: RunEvent | undefined): Html {
  if (!ev) return html``;
  return section(
    'Repository guidance',
    html`<p>
      The model was given <code>${str(ev.body.path)}</code> (${num(ev.body.chars) ?? 0}
      characters${ev.body.cut ? ', cut to the limit' : ''}) as the repository's guidance.
    </p>`,
  );
}

function environment(events: RunEvent[], repair: Body | undefined): Html {
  const builds = events.filter((e) => e.type === 'tool_end' && e.body.name === 'build_environment');
  const dockerfile = str(repair?.dockerfile) ?? str(obj(builds.at(-1)?.body.args).dockerfile) ?? null;
  const logs = events
    .map((e) =>
      e.type === 'environment_built'
        ? obj(obj(e.body).log).tail
        : e.type === 'build_network'
          ? e.body.log_tail
          : undefined,
    )
    .filter((t): t is string[] => Array.isArray(t));
  const tail = logs.at(-1);
  return html`${
    dockerfile
      ? html`<h3>Dockerfile</h3>
          <pre class="code">${dockerfile}</pre>`
      : html`<p class="muted">No Dockerfile yet.</p>`
  }
  ${
    tail
      ? html`<h3>Build log (tail)</h3>
          <pre class="code">${tail.join('\n')}</pre>`
      : ''
  }`;
}

function toolCalls(events: RunEvent[]): Html {
  const calls = events.filter((e) => e.type === 'tool_start' || e.type === 'tool_end');
  // A start whose end has not come yet is the call in flight.
  const ended = calls.filter((e) => e.type === 'tool_end').length;
  const inFlight = calls.filter((e) => e.type === 'tool_start').length > ended ? calls.at(-1) : undefined;
  const ends = events.filter((e) => e.type === 'tool_end');
  if (ends.length === 0 && !inFlight) return html`<p class="muted">None yet.</p>`;
  return html`<ol class="calls">
    ${ends.map((e, i) => html`<li>${toolCall(e, i)}</li>`)}${inFlight?.type === 'tool_start' ? html`<li class="muted"><code>${str(inFlight.body.name)}</code> running…</li>` : ''}
  </ol>`;
}

function modelRequests(replies: RunEvent[]): Html {
  if (replies.length === 0) return html`<p class="muted">None yet.</p>`;
  return table(
    ['#', 'Time', 'Model', 'Prompt', 'Cached', 'Completion', 'Total', 'Cost'],
    replies.map((r, i) => {
      const u = obj(r.body.usage);
      const cost = num(r.body.cost_usd) ?? num(u.cost_usd);
      // The service sent no usage: the tokens and their cost are estimated from sizes.
      const est = u.estimated === true ? ' (estimated)' : '';
      return html`<tr>
        <td>${i + 1}</td>
        <td>${time(r.ts)}</td>
        <td>${str(r.body.model)}</td>
        <td>${num(u.prompt)}</td>
        <td>${num(u.cached)}</td>
        <td>${num(u.completion)}</td>
        <td>${num(u.total)}${est}</td>
        <td>${cost === null ? '' : `$${cost.toFixed(4)}${est}`}</td>
      </tr>`;
    }),
  );
}

function cells(report: VerificationReport): Html {
  return html`<p>Verdict <strong>${report.verdict}</strong>: ${report.reason}</p>
    ${table(
      ['Cell', 'Source', 'Tests', 'Status', 'Passed', 'Failed', 'Errors', 'Skipped', 'Time'],
      report.cells.map(
        (c) =>
          html`<tr>
            <td>${c.name}</td>
            <td>${c.source}</td>
            <td>${c.tests}</td>
            <td>${c.status}</td>
            <td>${c.counts.passed}</td>
            <td>${c.counts.failed}</td>
            <td>${c.counts.errors}</td>
            <td>${c.counts.skipped}</td>
            <td>${duration(c.duration_ms)}</td>
          </tr>`,
      ),
    )}`;
}

function revisions(runs: RunRecord[], current: string): Html {
  return html`<ul>
    ${runs.map(
      (r) =>
        html`<li>
          ${r.id === current ? html`<strong>${r.id}</strong>` : html`<a href="/runs/${encodeURIComponent(r.id)}">${r.id}</a>`}:
          ${r.revision === null ? 'the run that opened the pull request' : `revision ${r.revision}`},
          ${stateBadge(r.state)} ${r.verdict ?? ''}
          ${r.pushed_commit ? html`<code>${r.pushed_commit.slice(0, 12)}</code>` : ''}
        </li>`,
    )}
  </ul>`;
}
