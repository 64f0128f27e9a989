/** The p-th percentile (nearest rank) of `xs`. */
export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One decimal. */
export const round = (x: number) => Math.round(x * 10) / 10;
