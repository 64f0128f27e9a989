import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { CONTEXT_CA, type SnapshotEntry } from './docker-context.js';

/**
 * An extra certificate authority (AGENTICFIX_BUILD_CA_FILE) trusted inside every build, for networks
 * that re-sign TLS. The builder puts the PEM bundle in the build context under a reserved name and adds
 * three steps after each FROM whose stage has a RUN (a stage without one opens no connection, and may
 * have no shell): copy it where update-ca-certificates looks, append it to the image's system bundle
 * (or start one), and point the usual variables at that bundle. The model's Dockerfile, its artifact
 * and the build log the model reads stay free of these steps (see BuildStepFilter).
 */

/** Where the CA lands: also where Debian's and Alpine's update-ca-certificates pick it up again. */
export const IMAGE_CA = '/usr/local/share/ca-certificates/agenticfix-build-ca.crt';
/** A link to the image's system bundle (with the CA appended): what the variables name. */
export const IMAGE_BUNDLE = '/etc/ssl/agenticfix-build-ca-bundle.crt';

// The first existing system bundle (Debian/Ubuntu/Alpine, RHEL/Fedora, SUSE) gets the CA appended; an image
// without one starts Debian's, which a later `apt-get install ca-certificates` regenerates with the CA in it.
// Never fails: as a non-root default user it leaves the bundle alone and NODE_EXTRA_CA_CERTS still works.
const SCRIPT = [
  'b=',
  'for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/ca-bundle.pem; do if [ -f "$f" ]; then b="$f"; break; fi; done',
  'if [ -z "$b" ]; then b=/etc/ssl/certs/ca-certificates.crt; mkdir -p /etc/ssl/certs; fi',
  `{ echo; cat ${IMAGE_CA}; } >> "$b"`,
  `if [ -d /etc/pki/ca-trust/source/anchors ]; then cp ${IMAGE_CA} /etc/pki/ca-trust/source/anchors/; fi`,
  `mkdir -p /etc/ssl; ln -sf "$b" ${IMAGE_BUNDLE}`,
].join('; ');

/** The steps added after a FROM; each one names the CA (how BuildStepFilter recognises them). */
export const CA_STEPS = [
  `COPY ${CONTEXT_CA} ${IMAGE_CA}`,
  `RUN ${JSON.stringify(['/bin/sh', '-c', `(${SCRIPT}) 2>/dev/null; true`])}`,
  `ENV NODE_EXTRA_CA_CERTS=${IMAGE_CA} ${['SSL_CERT_FILE', 'CURL_CA_BUNDLE', 'GIT_SSL_CAINFO', 'PIP_CERT', 'REQUESTS_CA_BUNDLE'].map((v) => `${v}=${IMAGE_BUNDLE}`).join(' ')}`,
];
const MARK = /agenticfix-build-ca|agenticfix\.build-ca/;

/** The Dockerfile with CA_STEPS after every FROM (not `scratch`) whose stage runs a command. */
export function withBuildCa(dockerfile: string): { dockerfile: string; added: number } {
  const lines = dockerfile.split('\n');
  const escape = /^\s*#\s*escape\s*=\s*(\S)/i.exec(dockerfile.split('\n', 1)[0] ?? '')?.[1] ?? '\\';
  // Instructions as [keyword, first line, last line]; comments inside a continuation do not end it.
  const ins: Array<{ kw: string; last: number; scratch: boolean }> = [];
  let open: { kw: string; text: string } | null = null;
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/\r$/, '');
    // Comments and empty lines never end a continuation (Docker skips them).
    if (/^\s*#/.test(line) || line.trim() === '') continue;
    open ??= { kw: (/^\s*(\S+)/.exec(line)?.[1] ?? '').toUpperCase(), text: '' };
    open.text += ` ${line}`;
    if (line.trimEnd().endsWith(escape)) continue;
    const image =
      open.text
        .trim()
        .split(/\s+/)
        .slice(1)
        .find((p) => !p.startsWith('--')) ?? '';
    ins.push({ kw: open.kw, last: i, scratch: image.toLowerCase() === 'scratch' });
    open = null;
  }
  const after = new Set<number>();
  ins.forEach((from, n) => {
    if (from.kw !== 'FROM' || from.scratch) return;
    const end = ins.findIndex((x, m) => m > n && x.kw === 'FROM');
    if (ins.slice(n + 1, end < 0 ? undefined : end).some((x) => x.kw === 'RUN')) after.add(from.last);
  });
  return {
    dockerfile: lines.flatMap((l, i) => (after.has(i) ? [l, ...CA_STEPS] : [l])).join('\n'),
    added: after.size * CA_STEPS.length,
  };
}

/** The CA as a build context entry, or a message for the operator when the file is not a PEM bundle. */
export async function readBuildCa(file: string): Promise<SnapshotEntry | string> {
  const content = await readFile(file).catch((err: unknown) => String(err));
  if (typeof content === 'string') return `cannot read AGENTICFIX_BUILD_CA_FILE: ${content.slice(0, 300)}`;
  if (!content.includes('-----BEGIN CERTIFICATE-----'))
    return `AGENTICFIX_BUILD_CA_FILE (${file}) holds no PEM certificate`;
  return { path: CONTEXT_CA, mode: 0o644, content, linkTarget: null };
}

/** A step line's start, which no other line of the builder has (numbers of any sane length fit in PREFIX_CHARS). */
const STEP = /^Step (\d+)\/(\d+) : (.*)$/s;
const PREFIX_CHARS = 64;
/** Most of a step line kept to decide it: the added steps name the CA well within this. */
const HEADER_CHARS = 4096;

/**
 * Drops the added steps from the classic builder's output (their `Step` line and everything up to the
 * next step) and renumbers the others, so the log reads as the model's Dockerfile. Fed raw chunks, it
 * holds back only the start of a line that may be a step line (at most HEADER_CHARS and one chunk) and
 * passes the rest on as it arrives: a step can print a line of any length without a newline.
 */
export class BuildStepFilter {
  /** The start of the current line while it is not yet decided; null once it is (the rest passes or is hidden). */
  private head: string | null = '';
  private hidden = 0;
  private hiding = false;

  constructor(private readonly added: number) {}

  write(text: string): string {
    let out = '';
    for (let from = 0; from < text.length;) {
      const nl = text.indexOf('\n', from);
      const end = nl < 0 ? text.length : nl + 1;
      out += this.piece(text.slice(from, end), nl >= 0);
      from = end;
    }
    return out;
  }

  end(): string {
    const rest = this.head === null ? '' : this.decide(this.head);
    this.head = '';
    return rest;
  }

  /** Part of one line; `ends` when it holds the line's newline. */
  private piece(text: string, ends: boolean): string {
    let out = '';
    if (this.head === null) out = this.hiding ? '' : text;
    else {
      const head = this.head + text;
      const known =
        ends ||
        head.length >= HEADER_CHARS ||
        (head.length >= PREFIX_CHARS && !/^Step \d+\/\d+ : /.test(head));
      if (known) out = this.decide(head);
      this.head = known ? null : head;
    }
    if (ends) this.head = '';
    return out;
  }

  /** What to pass on of a line's start (or all of a line), deciding whether its step is shown. */
  private decide(l: string): string {
    const step = STEP.exec(l);
    if (step) {
      this.hiding = MARK.test(step[3] ?? '');
      if (this.hiding) this.hidden++;
      else return `Step ${Number(step[1]) - this.hidden}/${Number(step[2]) - this.added} : ${step[3] ?? ''}`;
    }
    return this.hiding ? '' : l;
  }
}

const HOST_CAS = '/usr/local/share/ca-certificates';

/**
 * The extra CAs this machine trusts (an egress that re-signs TLS needs one; see docs/operating.md's build
 * network), written as one bundle into `dir`: what AGENTICFIX_BUILD_CA_FILE names on such a machine. Null
 * where there is none, as on a machine with direct access to the registries. For tests and benchmarks.
 */
export function machineCa(dir: string): string | null {
  const files = existsSync(HOST_CAS) ? readdirSync(HOST_CAS).filter((f) => f.endsWith('.crt')) : [];
  if (files.length === 0) return null;
  const bundle = path.join(dir, 'machine-ca.crt');
  writeFileSync(bundle, files.map((f) => readFileSync(path.join(HOST_CAS, f), 'utf8')).join('\n'));
  return bundle;
}
