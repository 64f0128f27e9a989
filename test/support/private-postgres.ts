import { execa } from 'execa';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './e2e.js';
import { missing, present, type Need } from './skip.js';

/**
 * A PostgreSQL cluster of the test's own (initdb in a temp dir, its own port and socket dir), to kill
 * and start again: the shared one (scripts/setup-services.sh) is never touched. As root (CI) the
 * server runs as the `postgres` user, which refuses root.
 */

const BIN_ROOT = '/usr/lib/postgresql';

function binDir(): string | null {
  const versions = existsSync(BIN_ROOT) ? readdirSync(BIN_ROOT).sort((a, b) => Number(b) - Number(a)) : [];
  const dir = versions
    .map((v) => path.join(BIN_ROOT, v, 'bin'))
    .find((d) => existsSync(path.join(d, 'initdb')));
  return dir ?? null;
}

/** The PostgreSQL server binaries, for `describeIf`. */
export function needPostgresBinaries(): Need {
  return binDir()
    ? present('PostgreSQL server binaries')
    : missing(
        'PostgreSQL server binaries',
        `no initdb under ${BIN_ROOT} (scripts/setup-services.sh installs them)`,
      );
}

export class PrivatePostgres {
  private constructor(
    private readonly dir: string,
    private readonly bin: string,
    readonly port: number,
  ) {}

  /** `postgres://` URL of its `postgres` database (trust auth, loopback only). */
  get url(): string {
    return `postgres://agenticfix@127.0.0.1:${this.port}/postgres`;
  }

  static async create(): Promise<PrivatePostgres> {
    const bin = binDir();
    if (!bin) throw new Error('no PostgreSQL server binaries');
    const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-pg-'));
    if (process.getuid?.() === 0) {
      const { stdout } = await execa('id', ['-u', 'postgres']);
      const { stdout: gid } = await execa('id', ['-g', 'postgres']);
      chownSync(dir, Number(stdout), Number(gid));
    }
    const pg = new PrivatePostgres(dir, bin, await freePort());
    await pg.as('initdb', ['-D', pg.data, '-A', 'trust', '-U', 'agenticfix', '--no-sync', '-E', 'UTF8']);
    await pg.start();
    return pg;
  }

  private get data(): string {
    return path.join(this.dir, 'data');
  }

  private as(tool: string, args: string[]) {
    const cmd = path.join(this.bin, tool);
    return process.getuid?.() === 0
      ? execa('runuser', ['-u', 'postgres', '--', cmd, ...args])
      : execa(cmd, args);
  }

  /** Starts the server and waits until it takes connections. */
  async start(): Promise<void> {
    const opts = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    await this.as('pg_ctl', ['-D', this.data, '-o', opts, '-l', path.join(this.dir, 'log'), '-w', 'start']);
  }

  /** Kills the server as a crash would (immediate: no shutdown checkpoint, connections cut). */
  async kill(): Promise<void> {
    await this.as('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
  }

  /** Stops it (if running) and removes its files. */
  async destroy(): Promise<void> {
    await this.kill().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
