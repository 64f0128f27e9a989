/**
 * Turns in this process, one holder per key at a time: builds of one environment asked for at once (a
 * run's attempts side by side, each with the same Dockerfile and files) take turns, so that the first
 * builds it and the others find it in the cache, rather than the engine building it once for each.
 */
export class Turns {
  private readonly held = new Map<string, Promise<void>>();

  /**
   * Waits until no one holds `key`, then holds it; the returned function ends the turn. A stop
   * (`signal`) ends the wait: the stopped one goes on without a turn (its work stops at once anyway).
   */
  async take(key: string, signal?: AbortSignal): Promise<() => void> {
    for (let held = this.held.get(key); held && !signal?.aborted; held = this.held.get(key))
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        signal?.addEventListener('abort', stop, { once: true });
        void held!.then(() => (signal?.removeEventListener('abort', stop), resolve()));
      });
    if (signal?.aborted) return () => {};
    let end!: () => void;
    const turn = new Promise<void>((resolve) => (end = resolve));
    this.held.set(key, turn);
    return () => {
      if (this.held.get(key) === turn) this.held.delete(key);
      end();
    };
  }
}
