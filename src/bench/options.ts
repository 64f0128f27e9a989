/**
 * How a benchmark runs. `smoke`: once at small sizes, so that CI notices a benchmark that no longer
 * runs; its figures mean nothing and are not asserted.
 */
export interface BenchOptions {
  smoke: boolean;
}
