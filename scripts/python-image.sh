#!/usr/bin/env bash
# Builds the local Python language image: the local base image (scripts/base-image.sh) with Debian's
# Python 3, pip, venv and pytest (PyPI may be unreachable, so pytest comes from Debian too), tagged
# agenticfix/python:<major.minor> and agenticfix/python:<full version> (scripts/runtime-tag.sh). The
# model's Python environments start FROM it without an apt step of their own. About 40 s on a cold
# engine; skipped when an image of it is present.
# Usage: scripts/python-image.sh   (AGENTICFIX_BASE_IMAGE: the base image, default agenticfix/debian:bookworm)
set -euo pipefail
REPO=agenticfix/python
BASE="${AGENTICFIX_BASE_IMAGE:-agenticfix/debian:bookworm}"
# shellcheck source=runtime-tag.sh
. "$(dirname "$0")/runtime-tag.sh"

present=$(docker images -q --filter "reference=$REPO" --filter label=agenticfix.runtime=python | head -n1)
if [ -n "$present" ]; then
  echo "python image already present: $(docker image inspect "$present" --format '{{join .RepoTags ", "}}')"
  exit 0
fi
docker image inspect "$BASE" >/dev/null 2>&1 \
  || { echo "the base image $BASE is missing: run scripts/base-image.sh first" >&2; exit 1; }
ctx=$(mktemp -d /tmp/agenticfix-python-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
    python3 python3-pip python3-venv python3-pytest >/dev/null && rm -rf /var/lib/apt/lists/*
DOCKERFILE
id=$(docker build -q "$ctx")
version=$(runtime_version "$id" python3 --version)
echo "FROM $id
LABEL agenticfix.runtime=python agenticfix.runtime.version=$version" >"$ctx/Dockerfile"
id=$(docker build -q "$ctx")
tag_runtime "$id" "$REPO" "${version%.*}" "$version"
echo "python image ready: $REPO:${version%.*} and $REPO:$version"
