import type { RunEvent } from '../store/store.js';
import { html, type Html } from './html.js';
import { duration } from './layout.js';

/**
 * One tool call as a person reads it, by kind: a read as the file and its lines, an edit as a small
 * diff, a test run as counts and failures, a build as its steps and time. The raw arguments and
 * observation stay one click away.
 */

/** Event bodies are the trace's JSON: each value read as the type it should have, or nothing. */
export type Body = Record<string, unknown>;
export const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
export const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
export const obj = (v: unknown): Body =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Body) : {};
const json = (v: unknown): string => JSON.stringify(v, null, 2) ?? 'null';
/** Long failure messages and steps are cut for the view; the raw JSON has them whole. */
const cut = (s: string, n = 600) => (s.length > n ? `${s.slice(0, n)}…` : s);

export function toolCall(e: RunEvent, i: number): Html {
  const result = obj(e.body.result);
  const failed = result.success === false;
  return html`<details id="call-${e.seq}">
    <summary>
      <span class="n">${i + 1}</span> <code>${str(e.body.name)}</code>
      <span class="${failed ? 'bad' : 'good'}">${failed ? (str(result.error_code) ?? 'failed') : 'ok'}</span>
      <span class="muted">${duration(num(e.body.duration_ms))}</span>
    </summary>
    ${failed ? html`<p class="bad">${cut(str(result.message) ?? str(result.error) ?? '')}</p>` : byKind(e)}
    <details class="raw" id="raw-${e.seq}">
      <summary>Raw JSON</summary>
      <h3>Arguments</h3>
      <pre class="code">${json(e.body.args)}</pre>
      <h3>Observation</h3>
      <pre class="code">${json(result)}</pre>
    </details>
  </details>`;
}

function byKind(e: RunEvent): Html {
  const args = obj(e.body.args);
  const data = obj(obj(e.body.result).data);
  switch (str(e.body.name)) {
    case 'read_file': {
      const [from, to, total] = [num(data.start_line), num(data.end_line), num(data.total_lines)];
      return html`<p>
        <code>${str(data.path) ?? str(args.path)}</code>
        ${from !== null && to !== null ? `lines ${from}–${to}${total !== null ? ` of ${total}` : ''}` : ''}
      </p>`;
    }
    case 'edit_file': {
      const lines = (text: unknown, sign: string) =>
        (str(text) ?? '')
          .split('\n')
          .map((l) => html`<span class="${sign === '-' ? 'del' : 'ins'}">${sign} ${l}</span> `);
      return html`<p><code>${str(args.path)}</code></p>
        <pre class="code diff">${lines(args.old_text, '-')}${lines(args.new_text, '+')}</pre>`;
    }
    case 'run_tests': {
      const s = obj(data.summary);
      const counts = (['passed', 'failed', 'errors', 'skipped'] as const)
        .filter((k) => (num(s[k]) ?? 0) > 0 || k === 'passed' || k === 'failed')
        .map((k) => `${num(s[k]) ?? 0} ${k}`)
        .join(', ');
      const failures = Array.isArray(data.failures) ? data.failures.map(obj) : [];
      return html`<p>
          <strong>${str(data.status) ?? ''}</strong> ${data.summary ? counts : 'no counts recognised'}
          <span class="muted">${duration(num(data.duration_ms))}</span>
        </p>
        ${
          failures.length
            ? html`<ul class="failures">
                ${failures.map(
                  (f) =>
                    html`<li>
                      <code>${str(f.id)}</code>
                      <pre class="wrap">${cut(str(f.message) ?? '')}</pre>
                    </li>`,
                )}
              </ul>`
            : ''
        }`;
    }
    case 'build_environment': {
      const steps = Array.isArray(data.steps) ? data.steps.filter((s) => typeof s === 'string') : [];
      return html`<p>Image built in ${duration(num(data.duration_ms)) || '—'}</p>
        <ol class="steps">
          ${steps.map((s) => html`<li><code>${cut(s, 200)}</code></li>`)}
        </ol>`;
    }
    default:
      return html``;
  }
}
