import { RUN_STATES, type RunRecord } from '../store/store.js';
import { html, type Html } from './html.js';
import { duration, runDuration, spent, stateBadge } from './layout.js';

/** The run list: the runs the signed-in person may read, with filters by repository and state. */
export function runList(runs: RunRecord[], filter: { repo: string; state: string }, repos: string[]): Html {
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
                      <td><a href="/runs/${encodeURIComponent(r.id)}">${r.id}</a></td>
                      <td>${r.owner}/${r.repo}</td>
                      <td>#${r.revision !== null && r.pr_number !== null ? r.pr_number : r.issue}</td>
                      <td>${r.trigger}</td>
                      <td>${stateBadge(r.state)}</td>
                      <td>${r.verdict ?? ''}</td>
                      <td>${duration(runDuration(r))}</td>
                      <td>${spent(r)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }`;
}
