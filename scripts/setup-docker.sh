#!/usr/bin/env bash
# Makes a Docker engine and the local base image available on a fresh Debian machine (run as root).
# Idempotent: installs docker.io and debootstrap only when dockerd is missing, starts dockerd only
# when `docker info` fails, waits until it answers, then builds the base image and the language images
# (Node from the npm registry, Python from Debian: what the model's environments start FROM) if missing.
# Best effort, never fatal: installs gVisor (Debian's runsc) and registers it with dockerd, for
# AGENTICFIX_RUNTIME=runsc and the suite's runs under gVisor (README, "gVisor").
# Usage: scripts/setup-docker.sh   (dockerd logs: ${AGENTICFIX_DOCKERD_LOG:-/var/log/agenticfix-dockerd.log})
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log="${AGENTICFIX_DOCKERD_LOG:-/var/log/agenticfix-dockerd.log}"
daemon_json=/etc/docker/daemon.json

loud() { echo "!!! gVisor: $* (AGENTICFIX_RUNTIME=runsc and the runs under gVisor are unavailable here) !!!" >&2; }

# Adds the runsc runtime to daemon.json, keeping everything else in it; prints `changed` when it wrote.
# --network=none: test containers have no network anyway, and Debian's runsc (2022-12) mistakes a
# container's network namespace for the host's on newer kernels ("cannot run with network enabled in
# root network namespace": it probes /proc/sys/net/core/rmem_default, which every namespace now has).
register_runsc() {
  command -v node >/dev/null || { loud "node is needed to merge $daemon_json"; return 1; }
  mkdir -p "$(dirname "$daemon_json")"
  node - "$daemon_json" "$(command -v runsc)" <<'JS'
const fs = require('node:fs');
const [file, runsc] = process.argv.slice(2);
const before = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
const config = before.trim() ? JSON.parse(before) : {};
config.runtimes = { ...config.runtimes, runsc: { path: runsc, runtimeArgs: ['--network=none'] } };
const after = `${JSON.stringify(config, null, 2)}\n`;
if (after === before) process.exit(0);
fs.writeFileSync(`${file}.tmp`, after);
fs.renameSync(`${file}.tmp`, file);
console.log('changed');
JS
}

# Before dockerd starts, so that a fresh machine's engine starts with runsc registered.
runsc_changed=
if [ "$(id -u)" != 0 ]; then
  loud "not root: runsc not installed or registered"
elif ! command -v runsc >/dev/null \
  && ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null 2>&1 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null; }; }; then
  loud "apt-get install runsc failed"
elif ! runsc_changed=$(register_runsc); then
  loud "could not register runsc in $daemon_json"
fi

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "setup-docker.sh must run as root to install docker.io" >&2; exit 1; }
  echo "installing docker.io and debootstrap ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi

started_here=
if ! docker info >/dev/null 2>&1; then
  started_here=1
  echo "starting dockerd (log: $log) ..."
  nohup dockerd >"$log" 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not answer within 60 s:" >&2; tail -n 30 "$log" >&2; exit 1; }
fi
echo "docker engine ready: $(docker version --format '{{.Server.Version}}')"

# An engine that was already running reads the new runtimes on SIGHUP: a reload, not a restart, so
# the containers of other processes using it keep running.
runtimes() { docker info --format '{{json .Runtimes}}' 2>/dev/null || true; }
has_runsc() { [[ "$(runtimes)" == *'"runsc"'* ]]; }
if [ -n "$runsc_changed" ] && [ -z "$started_here" ]; then
  echo "$daemon_json changed: reloading dockerd's configuration (SIGHUP) ..."
  kill -HUP "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null || loud "could not signal dockerd (/var/run/docker.pid)"
  for _ in $(seq 1 10); do
    has_runsc && break
    sleep 1
  done
fi

"$here/base-image.sh"
"$here/node-image.sh"
"$here/python-image.sh"

base="${AGENTICFIX_BASE_IMAGE:-agenticfix/debian:bookworm}"
if ! has_runsc; then
  if command -v runsc >/dev/null; then loud "dockerd does not list runsc after registering it (docker info: $(runtimes))"; fi
elif probe=$(timeout 120 docker run --rm --runtime=runsc --network=none "$base" true 2>&1); then
  echo "gVisor ready: $(runsc --version 2>/dev/null | head -n1), registered with dockerd and runs containers"
else
  loud "dockerd has runsc but it does not start containers on this kernel ($(uname -r)): $probe"
fi
