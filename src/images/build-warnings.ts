/**
 * What a successful build's output says that the model should still hear: a dependency refusing the
 * image's runtime (npm's EBADENGINE, pnpm's and yarn's engine checks, npm refusing its node), a
 * deprecation printed by the package tools, and which of the Dockerfile's steps the engine's layer
 * cache answered. Fed every line of the build's output; bounded whatever the build prints.
 */

const MAX_WARNINGS = 10;
const MAX_CHARS = 300;

/** Single-line warnings kept as they are. */
const LINE_WARNINGS: readonly RegExp[] = [
  /npm warn cli npm v\S+ does not support Node\.js/i, // npm itself on a runtime it does not support
  /Unsupported engine/i, // pnpm: ` WARN  Unsupported engine: wanted: {"node":">=20"} (current: …)`
  /The engine "[^"]+" is incompatible with this module/, // yarn classic
  /^DEPRECATION: /, // pip
];

/** npm's multi-line EBADENGINE block: `npm warn EBADENGINE   package: 'minimatch@10.0.1',` and so on. */
const EBADENGINE = /^npm warn EBADENGINE\s+(package|required|current):\s*(.*?),?\s*$/i;
const STEP = /^Step (\d+)\/(\d+) : /;

export class BuildFindings {
  private readonly found: string[] = [];
  private readonly seen = new Set<string>();
  private omitted = 0;
  private engine: Partial<Record<'package' | 'required' | 'current', string>> = {};
  private step: { n: number; total: number } | null = null;
  private readonly cached: { n: number; total: number }[] = [];

  line(line: string): void {
    const step = STEP.exec(line);
    if (step) this.step = { n: Number(step[1]), total: Number(step[2]) };
    else if (/^ ---> Using cache\s*$/.test(line) && this.step && this.cached.length < 1000)
      this.cached.push(this.step);
    if (/^npm warn EBADENGINE/i.test(line)) {
      const engine = EBADENGINE.exec(line);
      const field = engine?.[1]!.toLowerCase() as 'package' | 'required' | 'current' | undefined;
      if (field) this.engine[field] = engine![2]!.replace(/^'(.*)'$/, '$1');
      if (field === 'current') this.endEngine();
      return;
    }
    if (LINE_WARNINGS.some((p) => p.test(line))) this.add(line.trim());
  }

  /** The warnings, deduplicated, first ones first, and how many more were left out. */
  warnings(): string[] {
    return this.omitted > 0 ? [...this.found, `… ${this.omitted} more warnings left out`] : [...this.found];
  }

  /** The numbers of the steps the layer cache answered, among the first `steps` of the Dockerfile. */
  cachedSteps(steps: (total: number) => number): number[] {
    return this.cached.filter((s) => s.n <= steps(s.total)).map((s) => s.n);
  }

  private endEngine(): void {
    const { package: pkg, required, current } = this.engine;
    this.engine = {};
    this.add(
      `npm EBADENGINE: ${pkg ?? 'a package'} requires ${required ?? '?'}, the image has ${current ?? '?'}`,
    );
  }

  private add(warning: string): void {
    const w = warning.length > MAX_CHARS ? `${warning.slice(0, MAX_CHARS)}…` : warning;
    if (this.seen.has(w)) return;
    if (this.found.length >= MAX_WARNINGS) {
      this.omitted++;
      return;
    }
    this.seen.add(w);
    this.found.push(w);
  }
}

/**
 * End-of-life dates of the runtimes' release lines (nodejs.org's release schedule, python.org's
 * status of Python versions). A line older than every one listed ended before them.
 */
const END_OF_LIFE: Record<'Node.js' | 'Python', Record<string, string>> = {
  'Node.js': {
    '18': '2025-04-30',
    '19': '2023-06-01',
    '20': '2026-04-30',
    '21': '2024-06-01',
    '22': '2027-04-30',
    '23': '2025-06-01',
    '24': '2028-04-30',
    '25': '2026-06-01',
  },
  Python: {
    '3.8': '2024-10-07',
    '3.9': '2025-10-31',
    '3.10': '2026-10-31',
    '3.11': '2027-10-31',
    '3.12': '2028-10-31',
    '3.13': '2029-10-31',
  },
};

/** `v18.20.4` → Node.js 18; `Python 3.9.2` → Python 3.9. */
const RUNTIME_VERSION: [RegExp, keyof typeof END_OF_LIFE][] = [
  [/^v(\d+)\.\d+\.\d+$/, 'Node.js'],
  [/^Python (\d+\.\d+)\.\d+/, 'Python'],
];

const compareLines = (a: string, b: string) => a.localeCompare(b, undefined, { numeric: true });

/** A deprecated runtime among the image's versions (build_environment's `runtime`): one warning each. */
export function endOfLifeWarnings(versions: Record<string, string>, now = new Date()): string[] {
  const today = now.toISOString().slice(0, 10);
  return Object.values(versions).flatMap((answer) => {
    for (const [pattern, runtime] of RUNTIME_VERSION) {
      const line = pattern.exec(answer)?.[1];
      if (!line) continue;
      const table = END_OF_LIFE[runtime];
      const oldest = Object.keys(table).sort(compareLines)[0]!;
      const end = table[line] ?? (compareLines(line, oldest) < 0 ? `before ${table[oldest]}` : null);
      if (end && (end.startsWith('before') || end < today))
        return [
          `${runtime} ${answer.replace(/^(v|Python )/, '')} is past its end of life (${end}): current tools refuse it; start FROM a local language image with a supported ${runtime}`,
        ];
    }
    return [];
  });
}
