#!/usr/bin/env bash
# The image tools from Debian's packages: mmdebstrap (base root filesystem), buildah (build, chroot
# isolation), skopeo (copy the OCI archive to a registry). Needs root (CI and these machines run as root).
set -euo pipefail
missing=()
for tool in mmdebstrap buildah skopeo; do command -v "$tool" >/dev/null || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-image-tools: apt-get install ${missing[*]}" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
