#!/usr/bin/env node
// The house's shape from its imports: circles (files that import each other in a loop) and arrows that
// run back up (imports between folders that import each other, directly or around a loop), plus the
// files over the size a reader takes in at once. Prints JSON; exits 1 when there is a circle or an
// arrow back up. Usage: node scripts/check-imports.mjs [src-dir]
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const LONG_FILE_LINES = 400;
const root = path.resolve(process.argv[2] ?? new URL('../src', import.meta.url).pathname);

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.ts$/.test(e.name) && !/\.d\.ts$/.test(e.name) ? [p] : [];
  });
}

// Static `import … from`, `export … from`, side-effect `import '…'` and `import('…')`, relative only.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

const files = sources(root);
const known = new Set(files);
const edges = new Map(files.map((f) => [f, new Set()]));
for (const f of files) {
  for (const m of readFileSync(f, 'utf8').matchAll(SPECIFIER)) {
    const target = path.resolve(path.dirname(f), m[1]).replace(/\.js$/, '.ts');
    if (known.has(target) && target !== f) edges.get(f).add(target);
  }
}

/** Strongly connected components (Tarjan), each with more than one member. */
function loops(nodes, next) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of next(v)) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) out.push(scc.sort());
    }
  };
  for (const v of nodes) if (!idx.has(v)) visit(v);
  return out;
}

const rel = (f) => path.relative(root, f);
// A room is a top-level folder of src/, or a file at its root.
const room = (f) => rel(f).split(path.sep)[0];
const rooms = new Map();
for (const [f, targets] of edges)
  for (const t of targets)
    if (room(f) !== room(t)) {
      if (!rooms.has(room(f))) rooms.set(room(f), new Set());
      rooms.get(room(f)).add(room(t));
    }

const circles = loops(files, (f) => edges.get(f)).map((c) => c.map(rel));
const roomLoops = loops([...rooms.keys()], (r) => rooms.get(r) ?? []);
// Rooms in a loop cannot all stand above what they import: the arrows beyond a loop's downward order
// (n - 1 for n rooms) run back up.
const loopArrows = roomLoops.map((scc) =>
  scc.flatMap((r) => [...(rooms.get(r) ?? [])].filter((t) => scc.includes(t)).map((t) => `${r} -> ${t}`)),
);
const backArrowCount = loopArrows.reduce((n, arrows, i) => n + arrows.length - (roomLoops[i].length - 1), 0);
const long = files
  .filter((f) => !rel(f).startsWith(`emulator${path.sep}`))
  .map((f) => [rel(f), readFileSync(f, 'utf8').split('\n').length])
  .filter(([, n]) => n > LONG_FILE_LINES)
  .sort((a, b) => b[1] - a[1])
  .map(([f, n]) => `${f} ${n}`);

console.log(
  JSON.stringify({
    files: files.length,
    circles: circles.length,
    back_arrows: backArrowCount,
    [`files_over_${LONG_FILE_LINES}_lines`]: long.length,
    details: { circles, folder_loops: loopArrows, long_files: long },
  }),
);
process.exit(circles.length + backArrowCount > 0 ? 1 : 0);
