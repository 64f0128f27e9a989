#!/usr/bin/env bash
# Node.js of the supported major (22 LTS unless given) from the npm registry, for machines whose node is older
# and that reach no other download site: the `node-linux-<arch>` package is the official build, a tarball
# with bin/node and the headers (include/node) that native modules (better-sqlite3) compile against. npm is
# not in it: the machine's npm runs under it. Unpacked once into a cache folder; prints that folder.
#   dir=$(bash scripts/node-dist.sh) && export PATH="$dir/bin:$PATH" npm_config_nodedir="$dir"
# Usage: scripts/node-dist.sh [major]   (AGENTICFIX_NODE_CACHE: the cache folder, default ~/.cache/agenticfix)
set -euo pipefail
major="${1:-22}"
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
cache="${AGENTICFIX_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agenticfix}"
dir="$cache/node-linux-$arch-$major"
if ! [ -x "$dir/bin/node" ] || ! [ -f "$dir/include/node/common.gypi" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.node.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$major" >/dev/null)
  tar -xzf "$tmp"/node-linux-*.tgz -C "$tmp"
  [ -f "$tmp/package/include/node/common.gypi" ] || { echo "node-linux-$arch@$major has no headers" >&2; exit 1; }
  rm -rf "$dir"
  mv "$tmp/package" "$dir"
fi
"$dir/bin/node" --version >/dev/null
echo "$dir"
