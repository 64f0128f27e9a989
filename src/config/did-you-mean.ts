/** The nearest of `known` to a misspelt `name`, for "did you mean …?" hints (settings, config keys). */
export function nearest(name: string, known: readonly string[]): string | undefined {
  const [best] = known.map((n) => [n, editDistance(name, n)] as const).sort((a, b) => a[1] - b[1]);
  // At most 3 edits, and fewer than half the name: `colour` is not a misspelt `model`.
  return best && best[1] <= 3 && best[1] < name.length / 2 ? best[0] : undefined;
}

/** Levenshtein distance: one row at a time. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length]!;
}
