/**
 * Splits a command line into argv like a POSIX shell would for words and quotes only: single
 * quotes are literal, double quotes allow \" and \\, a backslash outside quotes escapes the next
 * character. No variables, globs or operators: the argv is executed without a shell.
 */
export function splitArgv(command: string): string[] {
  const out: string[] = [];
  let word = '';
  let inWord = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && (command[i + 1] === '"' || command[i + 1] === '\\')) word += command[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < command.length) {
      word += command[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new Error(`unterminated ${quote} quote in: ${command}`);
  if (inWord) out.push(word);
  return out;
}
