/** Where outage lines go: the process's logger (pino's signature). */
export interface OutageLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * One log line when a service (Redis, PostgreSQL) stops answering and one when it answers again,
 * however many connections fail and retry in between: a collector sees the outage and its length, not
 * a stack trace per connection per retry.
 */
export class OutageLog {
  private since: number | null = null;

  constructor(
    private readonly service: string,
    private readonly log?: OutageLogger,
  ) {}

  get down(): boolean {
    return this.since !== null;
  }

  failed(err: unknown): void {
    if (this.since !== null) return;
    this.since = Date.now();
    const error = err instanceof Error ? err.message : String(err);
    this.log?.warn({ service: this.service, error }, `${this.service} unreachable`);
  }

  answered(): void {
    if (this.since === null) return;
    const down_s = Math.round((Date.now() - this.since) / 1000);
    this.since = null;
    this.log?.info({ service: this.service, down_s }, `${this.service} reachable again`);
  }
}
