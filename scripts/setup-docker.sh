#!/usr/bin/env bash
# Makes a Docker engine and the local base image available on a fresh Debian machine (run as root).
# Idempotent: installs docker.io and debootstrap only when dockerd is missing, starts dockerd only
# when `docker info` fails, waits until it answers, then builds the base image if it is missing.
# Usage: scripts/setup-docker.sh   (dockerd logs: ${AGENTICFIX_DOCKERD_LOG:-/var/log/agenticfix-dockerd.log})
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log="${AGENTICFIX_DOCKERD_LOG:-/var/log/agenticfix-dockerd.log}"

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "setup-docker.sh must run as root to install docker.io" >&2; exit 1; }
  echo "installing docker.io and debootstrap ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd (log: $log) ..."
  nohup dockerd >"$log" 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not answer within 60 s:" >&2; tail -n 30 "$log" >&2; exit 1; }
fi
echo "docker engine ready: $(docker version --format '{{.Server.Version}}')"

"$here/base-image.sh"
