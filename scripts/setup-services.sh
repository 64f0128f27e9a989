#!/usr/bin/env bash
# Makes Redis and PostgreSQL (and headless Chromium) available on a fresh Debian machine (run as root) for the distributed
# queue and run store. Idempotent: installs redis-server and postgresql only when missing, starts each
# only when it does not answer, creates the agenticfix role and database only when absent, then writes
# the URLs the tests read to $AGENTICFIX_SERVICES_ENV (default /var/lib/agenticfix/services.env) as
# shell exports. Usage: scripts/setup-services.sh && . /var/lib/agenticfix/services.env
set -euo pipefail
env_file="${AGENTICFIX_SERVICES_ENV:-/var/lib/agenticfix/services.env}"
db=agenticfix
# Loopback-only services for tests; the password only keeps TCP auth (scram) exercised.
password=agenticfix

if ! command -v redis-server >/dev/null || ! command -v pg_ctlcluster >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "setup-services.sh must run as root to install services" >&2; exit 1; }
  echo "installing redis-server and postgresql ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server postgresql >/dev/null
fi

# Headless Chromium for the run pages' browser test (test/app/web/web-browser.test.ts, driven by puppeteer-core).
if ! command -v chromium >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "setup-services.sh must run as root to install chromium" >&2; exit 1; }
  echo "installing chromium ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
echo "chromium ready: $(chromium --version 2>/dev/null | head -1)"

if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  echo "starting redis-server ..."
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done
  redis-cli -h 127.0.0.1 ping >/dev/null || { echo "redis-server did not answer" >&2; exit 1; }
fi
echo "redis ready: $(redis-server --version | cut -d' ' -f3)"

cluster="$(pg_lsclusters -h | awk 'NR==1 {print $1" "$2}')"
[ -n "$cluster" ] || { echo "no PostgreSQL cluster found (pg_lsclusters)" >&2; exit 1; }
read -r version name <<<"$cluster"
if ! pg_isready -q -h 127.0.0.1; then
  echo "starting PostgreSQL $version/$name ..."
  pg_ctlcluster "$version" "$name" start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 && break; sleep 0.5; done
  pg_isready -q -h 127.0.0.1 || { echo "PostgreSQL did not answer" >&2; exit 1; }
fi
psql_admin() { su postgres -c "psql -qtAX -c \"$1\""; }
[ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname='$db'")" = 1 ] ||
  psql_admin "CREATE ROLE $db LOGIN PASSWORD '$password'"
[ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname='$db'")" = 1 ] ||
  psql_admin "CREATE DATABASE $db OWNER $db"
echo "postgresql ready: $(su postgres -c 'psql -qtAX -c "SHOW server_version"')"

mkdir -p "$(dirname "$env_file")"
cat >"$env_file" <<ENV
export AGENTICFIX_TEST_REDIS_URL=redis://127.0.0.1:6379
export AGENTICFIX_TEST_DATABASE_URL=postgres://$db:$password@127.0.0.1:5432/$db
ENV
echo "service URLs written to $env_file"
