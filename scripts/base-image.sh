#!/usr/bin/env bash
# Builds a local Debian base image for machines that cannot reach a container registry.
# debootstrap a minimal Debian into a temporary folder and `docker import` it; the mirror
# is read from this machine's apt sources so air-gapped mirrors work unchanged.
# Usage: scripts/base-image.sh [image-name]   (default: agenticfix/debian:bookworm)
set -euo pipefail
IMAGE="${1:-${AGENTICFIX_BASE_IMAGE:-agenticfix/debian:bookworm}}"
SUITE="${AGENTICFIX_BASE_SUITE:-bookworm}"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE already present"
  exit 0
fi

mirror="${AGENTICFIX_APT_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(grep -rhoE '^(URIs:|deb)\s+\S+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | awk '{print $2}' | grep -E '^https?://' | grep -E '/debian/?$' | head -n1 || true)
fi
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

root=$(mktemp -d /tmp/agenticfix-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap $SUITE from $mirror ..."
debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >/tmp/agenticfix-debootstrap.log 2>&1 \
  || { tail -n 30 /tmp/agenticfix-debootstrap.log >&2; exit 1; }
# Point apt inside the image at the same mirror and drop caches to keep it small.
echo "deb $mirror $SUITE main" >"$root/etc/apt/sources.list"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "base image ready: $IMAGE"
