#!/usr/bin/env bash
# Builds a local Node.js image for machines that cannot reach a container registry (the app's Dockerfile
# starts FROM one: `docker build --build-arg NODE_IMAGE=agenticfix/node:20 .`). It is the local base image
# (scripts/base-image.sh) with this machine's own Node.js: the `node` binary, npm and the headers that
# native modules compile against, so nothing is downloaded.
# Usage: scripts/node-image.sh [image-name]   (default: agenticfix/node:<major of this node>)
set -euo pipefail
node_bin=$(command -v node) || { echo "node is not installed on this machine" >&2; exit 1; }
major=$("$node_bin" -p 'process.versions.node.split(".")[0]')
IMAGE="${1:-agenticfix/node:$major}"
BASE="${AGENTICFIX_BASE_IMAGE:-agenticfix/debian:bookworm}"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "node image $IMAGE already present"
  exit 0
fi
docker image inspect "$BASE" >/dev/null 2>&1 \
  || { echo "the base image $BASE is missing: run scripts/base-image.sh first" >&2; exit 1; }
prefix=$(dirname "$(dirname "$(readlink -f "$node_bin")")")
[ -d "$prefix/lib/node_modules/npm" ] || { echo "npm not found under $prefix/lib/node_modules" >&2; exit 1; }
[ -d "$prefix/include/node" ] || { echo "Node.js headers not found under $prefix/include/node" >&2; exit 1; }

ctx=$(mktemp -d /tmp/agenticfix-node-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$(readlink -f "$node_bin")" "$ctx/node"
cp -r "$prefix/lib/node_modules/npm" "$ctx/npm"
cp -r "$prefix/include/node" "$ctx/include"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY include /usr/local/include/node
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
  && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version && npm --version
# node-gyp finds the headers here instead of downloading them.
ENV npm_config_nodedir=/usr/local
DOCKERFILE
docker build -q -t "$IMAGE" "$ctx" >/dev/null
echo "node image ready: $IMAGE"
