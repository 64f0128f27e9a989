import { RUN_STATES, type RunRecord } from '../store/store.js';
import { recordedAttempts } from '../pipeline/attempts.js';
import { html, type Html } from './html.js';
import { duration, runDuration, spent, stateBadge } from './layout.js';

/** The run list: the runs the signed-in person may read, with filters by repository and state, by pages. */
export function runList(
  runs: RunRecord[],
  filter: { repo: string; state: string },
  repos: string[],
  paging: { page: number; older: boolean },
): Html {
  const pageLink = (page: number, text: string) => {
    const q = new URLSearchParams({
      ...(filter.repo && { repo: filter.repo }),
      ...(filter.state && { state: filter.state }),
    });
    if (page > 1) q.set('page', String(page));
    return html`<a href="/runs${q.size ? `?${q}` : ''}">${text}</a>`;
  };
  const option = (value: string, selected: string) =>
    html`<option value="${value}" ${value === selected ? html`selected` : ''}>${value || 'any'}</option>`;
  return html`<h1>Runs</h1>
    <form class="filters" method="get" action="/runs">
      <label
        >Repository
        <select name="repo">
          ${['', ...repos].map((r) => option(r, filter.repo))}
        </select>
      </label>
      <label
        >State
        <select name="state">
          ${['', ...RUN_STATES].map((s) => option(s, filter.state))}
        </select>
      </label>
      <button type="submit">Filter</button>
    </form>
    ${
      runs.length === 0
        ? html`<p class="muted">No runs to show.</p>`
        : html`<div class="scroll">
            <table class="runs">
              <caption class="sr-only">
                Runs, newest first
              </caption>
              <thead>
                <tr>
                  <th scope="col">Run</th>
                  <th scope="col">Repository</th>
                  <th scope="col">Issue</th>
                  <th scope="col">Started (UTC)</th>
                  <th scope="col">Trigger</th>
                  <th scope="col">State</th>
                  <th scope="col">Verdict</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Cost</th>
                </tr>
              </thead>
              <tbody>
                ${runs.map(
                  (r) =>
                    html`<tr>
                      <td data-label="Run"><a href="/runs/${encodeURIComponent(r.id)}">${r.id}</a></td>
                      <td data-label="Repository">${r.owner}/${r.repo}</td>
                      <td data-label="Issue">
                        #${r.revision !== null && r.pr_number !== null ? r.pr_number : r.issue}
                      </td>
                      <td data-label="Started">${startTime(r)}</td>
                      <td data-label="Trigger">${r.trigger}</td>
                      <td data-label="State">${stateBadge(r.state)}</td>
                      <td data-label="Verdict">${r.verdict ?? '—'}${attempts(r)}</td>
                      <td data-label="Duration">${duration(runDuration(r)) || '—'}</td>
                      <td data-label="Cost">${spent(r) || '—'}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }
    <nav class="pages" aria-label="Pages">
      ${paging.page > 1 ? pageLink(paging.page - 1, '← Newer runs') : ''}
      ${paging.older ? pageLink(paging.page + 1, 'Older runs →') : ''}
    </nav>`;
}

/** A run of several attempts is one row: how many it made (each is on the run's page). */
function attempts(r: RunRecord): Html | '' {
  const n = recordedAttempts(r).length;
  return n > 0 ? html` <span class="muted">(${n} attempts)</span>` : '';
}

/** When the run started (queued runs: when it was recorded), to the minute, UTC. */
function startTime(r: RunRecord): Html {
  const at = r.started_at ?? r.created_at;
  return html`<time datetime="${at}">${at.slice(0, 16).replace('T', ' ')}</time>`;
}
