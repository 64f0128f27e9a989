import { detectRunner } from '../runners.js';
import { instrumentArgv, type InstrumentedCommand } from './runner.js';
import { relativeToRoot } from './types.js';

/**
 * A task row's command line as a shell reads it, for rows written with shell syntax (`> out.json`,
 * `&&`, `VAR=value` prefixes): they run through `sh -c`, with the judge's report flags added to the
 * runner's own words. Rows are the operator's trusted input; repository configs stay argv.
 */
interface Token {
  raw: string;
  /** The word after quote removal; null for an operator. */
  word: string | null;
}

const OPERATOR = /^(?:&&|\|\||[;&|]|\d?>>?(?:&\d)?|&>|\d?<)/;

// Not shell-quote's parse (issue 39): each token's raw text is kept to write the rest of the line back as
// written, which its parse does not give, and it expands `$VAR` and globs, which must reach `sh -c` as written.
function tokenize(command: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < command.length) {
    if (/\s/.test(command[i]!)) {
      i++;
      continue;
    }
    const op = OPERATOR.exec(command.slice(i));
    if (op) {
      out.push({ raw: op[0], word: null });
      i += op[0].length;
      continue;
    }
    const start = i;
    let word = '';
    while (i < command.length && !/\s/.test(command[i]!) && !/^(?:[;&|<>])/.test(command[i]!)) {
      const c = command[i]!;
      if (c === "'") {
        const end = command.indexOf("'", i + 1);
        if (end < 0) throw new Error(`unterminated ' quote in: ${command}`);
        word += command.slice(i + 1, end);
        i = end + 1;
      } else if (c === '"') {
        let j = i + 1;
        for (; j < command.length && command[j] !== '"'; j++) {
          if (command[j] === '\\' && /["\\$`]/.test(command[j + 1] ?? '')) j++;
          word += command[j];
        }
        if (j >= command.length) throw new Error(`unterminated " quote in: ${command}`);
        i = j + 1;
      } else if (c === '\\' && i + 1 < command.length) {
        word += command[i + 1];
        i += 2;
      } else {
        word += c;
        i++;
      }
    }
    out.push({ raw: command.slice(start, i), word });
  }
  return out;
}

/** Whether a command line needs a shell: operators, redirections, expansions or a `VAR=value` prefix. */
export function needsShell(command: string): boolean {
  let tokens: Token[];
  try {
    tokens = tokenize(command);
  } catch {
    return false;
  }
  return tokens.some(
    (t, i) =>
      t.word === null ||
      /[$`*?~]/.test(t.raw.replace(/'[^']*'/g, '')) ||
      (i === 0 && /^[A-Za-z_]\w*=/.test(t.word)),
  );
}

const quote = (w: string) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`);
const SEPARATOR = /^(?:&&|\|\||[;&|])$/;
const REDIRECT = /[<>]/;

/**
 * Instruments the first simple command of the line that runs a known runner (see instrumentArgv) and
 * keeps the rest as written. A report the command writes itself by redirecting that runner's stdout
 * (mocha 6's json reporter has no output option) is `stdoutFile`, read when the judge's own is missing.
 */
export function instrumentShell(command: string): InstrumentedCommand {
  const tokens = tokenize(command);
  const segments: Token[][] = [[]];
  for (const t of tokens) {
    if (t.word === null && SEPARATOR.test(t.raw)) segments.push([t], []);
    else segments.at(-1)!.push(t);
  }
  let found: InstrumentedCommand | null = null;
  let stdoutFile: string | null = null;
  const rebuilt: string[] = [];
  for (const seg of segments) {
    const words: string[] = [];
    const assignments: string[] = [];
    const redirects: string[] = [];
    let target: string | null = null;
    for (let i = 0; i < seg.length; i++) {
      const t = seg[i]!;
      if (t.word === null && REDIRECT.test(t.raw)) {
        // `2>&1` names no file; every other redirection takes the next word.
        if (/&\d$/.test(t.raw)) {
          redirects.push(t.raw);
          continue;
        }
        const next = seg[++i];
        redirects.push(t.raw, next?.raw ?? '');
        if (/^(?:1?>>?|&>)$/.test(t.raw) && next?.word) target = next.word;
      } else if (t.word === null) words.push(t.raw);
      else if (words.length === 0 && /^[A-Za-z_]\w*=/.test(t.word)) assignments.push(t.raw);
      else words.push(t.word);
    }
    if (found || detectRunner(words) === 'generic') {
      rebuilt.push(...seg.map((t) => t.raw));
      continue;
    }
    found = instrumentArgv(words);
    stdoutFile = target;
    rebuilt.push(...assignments, ...found.argv.map(quote), ...redirects);
  }
  const cmd: InstrumentedCommand = found ?? {
    runner: 'generic',
    argv: [],
    reportFile: null,
  };
  return {
    ...cmd,
    argv: ['sh', '-c', rebuilt.join(' ')],
    stdoutFile: stdoutFile === null ? null : relativeToRoot(stdoutFile),
  };
}
