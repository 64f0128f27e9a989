import type { RunRecord } from '../store/store.js';
import { html, type Html } from './html.js';

/** The page frame: one stylesheet and one script of our own (the CSP allows nothing else). */
export function page(o: { title: string; user: string | null; csrf?: string; body: Html }): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${o.title} · AgenticFix</title>
        <link rel="stylesheet" href="/assets/diff2html.css" />
        <link rel="stylesheet" href="/assets/app.css" />
        <script src="/assets/app.js" defer></script>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
          <a class="brand" href="/runs">AgenticFix runs</a>
          ${
            o.user
              ? html`<form method="post" action="/logout" class="who">
                  <span>Signed in as <strong>${o.user}</strong></span>
                  <input type="hidden" name="csrf" value="${o.csrf ?? ''}" />
                  <button type="submit">Sign out</button>
                </form>`
              : ''
          }
        </header>
        <main id="main">${o.body}</main>
      </body>
    </html>`;
}

/** A message page (not found, sign-in needed, errors). */
export const notice = (title: string, text: string, user: string | null = null): Html =>
  page({
    title,
    user,
    body: html`<h1>${title}</h1>
      <p>${text}</p>`,
  });

/** Milliseconds as `1 h 2 min`, `3 min 4 s` or `5.6 s`. */
export function duration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) return '';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** A run's wall time: to its end, or to now while it goes. */
export function runDuration(run: RunRecord, at = Date.now()): number | null {
  if (!run.started_at) return null;
  const end = run.finished_at ? Date.parse(run.finished_at) : at;
  return end - Date.parse(run.started_at);
}

/** What a run cost: US dollars when the run store has them (cost_usd), else tokens. */
export function spent(run: RunRecord): string {
  const cost = (run as { cost_usd?: number | null }).cost_usd;
  if (typeof cost === 'number') return `$${cost.toFixed(4)}`;
  return run.tokens === null ? '' : `${run.tokens.toLocaleString('en')} tokens`;
}

export const stateBadge = (state: string): Html => html`<span class="badge state-${state}">${state}</span>`;

/** A table under column headings, scrolled sideways on a narrow screen. */
export const table = (heads: readonly string[], rows: readonly Html[], cls?: string): Html =>
  html`<div class="scroll">
    <table${cls ? html` class="${cls}"` : ''}>
      <thead>
        <tr>
          ${heads.map((h) => html`<th scope="col">${h}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${rows}
      </tbody>
    </table>
  </div>`;
