import { Turns } from '../../../src/images/turns.js';

/**
 * Builds of one environment asked for at once (a run's attempts side by side) take turns, so that the
 * engine builds it once and the others take it from the cache; other environments do not wait.
 */
describe('Turns', () => {
  const tick = () => new Promise((r) => setTimeout(r, 10));

  it('one holder per key: the next takes its turn when the first ends it; other keys go on', async () => {
    const turns = new Turns();
    const order: string[] = [];
    const first = await turns.take('env-a');
    const second = turns.take('env-a').then((end) => (order.push('second'), end));
    const other = await turns.take('env-b'); // another environment: no wait
    other();
    await tick();
    expect(order).toEqual([]);
    order.push('first ends');
    first();
    const end = await second;
    expect(order).toEqual(['first ends', 'second']);
    const third = turns.take('env-a').then((end) => (order.push('third'), end));
    await tick();
    expect(order).toHaveLength(2);
    end();
    (await third)();
    expect(order).toEqual(['first ends', 'second', 'third']);
  });

  it('a stop ends the wait without a turn: the holder keeps it', async () => {
    const turns = new Turns();
    const held = await turns.take('env');
    const stop = new AbortController();
    const waiting = turns.take('env', stop.signal);
    await tick();
    stop.abort();
    (await waiting)(); // ending a turn never held changes nothing
    let next = false;
    void turns.take('env').then(() => (next = true));
    await tick();
    expect(next).toBe(false);
    held();
    await tick();
    expect(next).toBe(true);
  });
});
