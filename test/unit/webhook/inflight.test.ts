import { jest } from '@jest/globals';
import { InflightBytes, type Reader } from '../../../src/webhook/server.js';

/**
 * Issue 40 (acknowledgement p99): the body deadline of every delivery being read is one timer, armed for
 * the oldest body, not a timer armed and cleared per delivery. Each body still gets its own full time.
 */
describe('body deadlines share one timer', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const reading = (inflight: InflightBytes) => {
    const stopped: string[] = [];
    const open = (name: string): Reader => {
      const r = inflight.open();
      r.stop = (why) => {
        stopped.push(`${name}:${why}`);
        inflight.close(r);
      };
      return r;
    };
    return { stopped, open };
  };

  it('each body is stopped at its own deadline; one read whole never is', () => {
    const inflight = new InflightBytes(1000, 1000);
    const { stopped, open } = reading(inflight);
    open('a');
    jest.advanceTimersByTime(300);
    open('b');
    const c = open('c');
    inflight.take(c, 10);
    inflight.read(c); // read whole: held, never stopped
    jest.advanceTimersByTime(699);
    expect(stopped).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(stopped).toEqual(['a:timeout']);
    jest.advanceTimersByTime(299);
    expect(stopped).toEqual(['a:timeout']);
    jest.advanceTimersByTime(1);
    expect(stopped).toEqual(['a:timeout', 'b:timeout']);
    jest.advanceTimersByTime(10_000);
    expect(stopped).toEqual(['a:timeout', 'b:timeout']);
    inflight.close(c);
  });

  it('200 bodies opened at once arm one timer, and a body opened after the others were read is timed from its own start', () => {
    const inflight = new InflightBytes(1_000_000, 1000);
    const { stopped, open } = reading(inflight);
    const before = jest.getTimerCount();
    const burst = Array.from({ length: 200 }, (_, i) => open(`d${i}`));
    expect(jest.getTimerCount() - before).toBe(1);
    for (const r of burst) {
      inflight.take(r, 100);
      inflight.read(r);
      inflight.close(r);
    }
    jest.advanceTimersByTime(900);
    open('late');
    jest.advanceTimersByTime(100); // the burst's deadline: nothing is late yet
    expect(stopped).toEqual([]);
    jest.advanceTimersByTime(899);
    expect(stopped).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(stopped).toEqual(['late:timeout']);
  });

  it('a body stopped for room gives its bytes back', () => {
    const inflight = new InflightBytes(100, 60_000);
    const { stopped, open } = reading(inflight);
    const slow = open('slow');
    expect(inflight.take(slow, 80)).toBe(true);
    jest.advanceTimersByTime(2000); // past the grace a body has before it may be stopped for another
    const fast = open('fast');
    expect(inflight.take(fast, 50)).toBe(true);
    expect(stopped).toEqual(['slow:busy']);
    inflight.close(fast);
  });
});
