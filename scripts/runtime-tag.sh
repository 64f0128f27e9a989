#!/usr/bin/env bash
# Sourced by the language image scripts (node-image.sh, python-image.sh). A language image is tagged by its
# runtime and version, `agenticfix/<runtime>:<major or major.minor>` and `agenticfix/<runtime>:<full version>`,
# and labelled `agenticfix.runtime=<runtime>` and `agenticfix.runtime.version=<full version>`: the builder
# (src/images/base-images.ts) names them to the model with the version from the full tag.

# Prints the full runtime version of IMAGE: its label, or (an image built before the label) what `CMD…` prints.
runtime_version() {
  local image=$1
  shift
  local v
  v=$(docker image inspect "$image" --format '{{index .Config.Labels "agenticfix.runtime.version"}}' 2>/dev/null || true)
  [ -n "$v" ] && [ "$v" != '<no value>' ] || v=$(docker run --rm --network none "$image" "$@")
  v="${v#v}"
  v="${v#Python }"
  [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "unexpected version from $image: $v" >&2; return 1; }
  echo "$v"
}

# Tags IMAGE (by id) as REPO:SHORT and REPO:FULL; a tag already on that image is left alone.
tag_runtime() {
  local image=$1 repo=$2 short=$3 full=$4 id tag
  id=$(docker image inspect "$image" --format '{{.Id}}')
  for tag in "$repo:$short" "$repo:$full"; do
    [ "$(docker image inspect "$tag" --format '{{.Id}}' 2>/dev/null || true)" = "$id" ] || docker tag "$id" "$tag"
  done
}
