#!/usr/bin/env bash
# Builds a local Node.js image for machines that cannot reach a container registry (the app's Dockerfile
# starts FROM one: `docker build --build-arg NODE_IMAGE=agenticfix/node:22 .`). It is the local base image
# (scripts/base-image.sh) with Node.js of the supported major from the npm registry (scripts/node-dist.sh:
# the `node` binary and the headers that native modules compile against) and this machine's npm, so nothing
# else is downloaded. It is also the language image the model's Node environments start FROM, so it is
# tagged with the full version too (agenticfix/node:22 and agenticfix/node:22.x.y; scripts/runtime-tag.sh).
# Usage: scripts/node-image.sh [image-name]   (default: agenticfix/node:<major>; AGENTICFIX_NODE_MAJOR, 22)
set -euo pipefail
major="${AGENTICFIX_NODE_MAJOR:-22}"
IMAGE="${1:-agenticfix/node:$major}"
BASE="${AGENTICFIX_BASE_IMAGE:-agenticfix/debian:bookworm}"

# shellcheck source=runtime-tag.sh
. "$(dirname "$0")/runtime-tag.sh"
tag_version() {
  version=$(runtime_version "$IMAGE" node --version)
  tag_runtime "$IMAGE" "${IMAGE%:*}" "${IMAGE##*:}" "$version"
}

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  tag_version
  echo "node image $IMAGE already present (Node.js $version)"
  exit 0
fi
docker image inspect "$BASE" >/dev/null 2>&1 \
  || { echo "the base image $BASE is missing: run scripts/base-image.sh first" >&2; exit 1; }
node_dir=$(bash "$(dirname "$0")/node-dist.sh" "$major")
# npm's own folder (not `npm root -g`: under another node on PATH that names that node's prefix).
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
[ -f "$npm_dir/bin/npm-cli.js" ] || { echo "npm not found at $npm_dir" >&2; exit 1; }

ctx=$(mktemp -d /tmp/agenticfix-node-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$node_dir/bin/node" "$ctx/node"
cp -r "$npm_dir" "$ctx/npm"
cp -r "$node_dir/include/node" "$ctx/include"
version=$("$node_dir/bin/node" --version)
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY include /usr/local/include/node
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
  && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version && npm --version
# node-gyp finds the headers here instead of downloading them.
ENV npm_config_nodedir=/usr/local
LABEL agenticfix.runtime=node agenticfix.runtime.version=${version#v}
DOCKERFILE
docker build -q -t "$IMAGE" "$ctx" >/dev/null
tag_version
echo "node image ready: $IMAGE and ${IMAGE%:*}:$version"
