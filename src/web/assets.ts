import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * The pages' static files: our stylesheet (readable on a phone, WCAG AA contrast, visible focus), the
 * script that keeps a running run's page live (server-sent events, then the page body fetched again),
 * and diff2html's stylesheet as the package ships it.
 */

const CSS = `
:root { color-scheme: light; --fg: #1f2328; --muted: #57606a; --bg: #fff; --line: #d0d7de; --accent: #0550ae; --bad: #a40e26; --good: #116329; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
a:focus, button:focus, summary:focus, select:focus { outline: 3px solid #0969da; outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 8px; top: 8px; background: #fff; padding: 4px; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
.top { display: flex; flex-wrap: wrap; gap: 8px; justify-content: space-between; align-items: center; padding: 8px 16px; border-bottom: 1px solid var(--line); }
.brand { font-weight: 600; text-decoration: none; }
.who { display: flex; gap: 8px; align-items: center; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 12px 16px 48px; overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; word-break: break-all; } h2 { font-size: 1.2rem; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 28px; } h3 { font-size: 1rem; }
button { font: inherit; padding: 6px 14px; border: 1px solid var(--line); border-radius: 6px; background: #f6f8fa; color: var(--fg); cursor: pointer; min-height: 44px; }
button.danger { background: var(--bad); color: #fff; border-color: var(--bad); }
select { font: inherit; min-height: 44px; }
.filters { display: flex; flex-wrap: wrap; gap: 12px; align-items: end; }
.filters label { display: flex; flex-direction: column; font-size: .9rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
.muted { color: var(--muted); } .bad { color: var(--bad); } .good { color: var(--good); }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; border: 1px solid var(--line); font-size: .85rem; }
.state-running, .state-queued { background: #ddf4ff; } .state-done { background: #dafbe1; } .state-failed, .state-interrupted { background: #ffebe9; }
.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 4px 16px; }
.facts dt { font-weight: 600; } .facts dd { margin: 0; min-width: 0; }
pre { overflow-x: auto; } pre.code, pre.wrap { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 8px; font-size: .85rem; max-height: 32rem; }
pre.wrap { white-space: pre-wrap; word-break: break-word; }
.timeline { display: flex; flex-wrap: wrap; gap: 8px; list-style: none; padding: 0; }
.timeline li { border: 1px solid var(--line); border-radius: 6px; padding: 4px 10px; }
.timeline li.current { border-color: var(--accent); border-width: 2px; }
.phase { font-weight: 600; }
.calls { padding-left: 0; list-style: none; }
.calls details { border: 1px solid var(--line); border-radius: 6px; margin: 4px 0; padding: 4px 8px; }
.calls summary { cursor: pointer; min-height: 32px; }
.calls .n { display: inline-block; min-width: 2em; color: var(--muted); }
.live { border-left: 4px solid var(--accent); padding-left: 8px; }
.cancel { margin: 12px 0; }
.calls li, .calls details { min-width: 0; }
.calls details.raw { border: 0; padding: 0; margin-top: 4px; }
pre.diff .del { background: #ffebe9; } pre.diff .ins { background: #dafbe1; }
.failures pre.wrap { max-height: 12rem; }
.align-left { text-align: left; } .align-center { text-align: center; } .align-right { text-align: right; }
.md table { display: block; overflow-x: auto; max-width: 100%; }
.pages { display: flex; gap: 16px; margin: 12px 0; }
@media (max-width: 600px) {
  .facts { grid-template-columns: minmax(0, 1fr); } .facts dd { margin-bottom: 6px; } main { padding: 8px; }
  /* The run list as cards: every fact of a run in view, each named. */
  table.runs thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.runs, table.runs tbody, table.runs tr, table.runs td { display: block; }
  table.runs tr { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; padding: 4px 8px; }
  table.runs td { border: 0; padding: 2px 0; }
  table.runs td::before { content: attr(data-label) ": "; color: var(--muted); }
}
`;

const JS = `
(function () {
  function live() {
    var run = document.getElementById('run');
    if (!run || run.dataset.active !== 'true' || !window.EventSource) return;
    var id = run.dataset.run;
    var source = new EventSource('/runs/' + encodeURIComponent(id) + '/live?after=' + run.dataset.seq);
    var busy = false, again = false;
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch('/runs/' + encodeURIComponent(id) + '/body', { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null) return;
          var now = document.getElementById('run');
          var open = Array.prototype.map.call(now.querySelectorAll('details[open]'), function (d) { return d.id; });
          var focused = document.activeElement && document.activeElement.closest('details') ? document.activeElement.closest('details').id : null;
          var box = document.createElement('div');
          box.innerHTML = text;
          var next = box.firstElementChild;
          open.forEach(function (o) { var d = o && next.querySelector('#' + CSS.escape(o)); if (d) d.open = true; });
          now.replaceWith(next);
          if (focused) { var f = document.querySelector('#' + CSS.escape(focused) + ' summary'); if (f) f.focus(); }
          if (next.dataset.active !== 'true') source.close();
        })
        .finally(function () { busy = false; if (again) { again = false; refresh(); } });
    }
    source.addEventListener('change', refresh);
    source.addEventListener('end', function () { source.close(); refresh(); });
  }
  document.addEventListener('DOMContentLoaded', live);
})();
`;

const require = createRequire(import.meta.url);
let diffCss: string | null = null;

/** The asset at `path`, or null. */
export function asset(path: string): { type: string; body: string } | null {
  if (path === '/assets/app.css') return { type: 'text/css; charset=utf-8', body: CSS };
  if (path === '/assets/app.js') return { type: 'text/javascript; charset=utf-8', body: JS };
  if (path === '/assets/diff2html.css') {
    diffCss ??= readFileSync(require.resolve('diff2html/bundles/css/diff2html.min.css'), 'utf8');
    return { type: 'text/css; charset=utf-8', body: diffCss };
  }
  return null;
}
