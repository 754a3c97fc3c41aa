#!/usr/bin/env bash
# `make image`: the hami-fast container image as an OCI archive under dist/.
#
#   1. base: a Debian slim root filesystem from Debian's packages (mmdebstrap, minbase plus
#      deploy/image/base-packages.txt, docs and locales left out), imported into buildah's storage;
#   2. image: deploy/image/Containerfile built by buildah with --isolation chroot on that base,
#      the wheel (dist/, from `make wheel`) and its dependency wheels bind-mounted for the install;
#   3. dist/hami-fast-v<version>.oci.tar, which an operator pushes with
#      skopeo copy oci-archive:dist/hami-fast-v<version>.oci.tar docker://REGISTRY/hami-fast:v<version>
#
# Both steps are cached under ${HAMI_FAST_CACHE:-~/.cache/hami-fast}/image: the base by its package
# list and options, the image by the sha256 of the wheel, the Containerfile and the base. A warm run
# copies the cached archive. Prints the archive's path on stdout; progress goes to stderr.
# Env: WHEEL (default: the newest dist/hami_fast-<version>-*.whl), IMAGE (default localhost/hami-fast:v<version>),
# SUITE (default bookworm), DEBIAN_MIRROR (default http://deb.debian.org), PYTHON (for `pip wheel`, default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "build-image: $*" >&2; }

VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
IMAGE="${IMAGE:-localhost/hami-fast:v$VERSION}"
SUITE="${SUITE:-bookworm}"
PYTHON="${PYTHON:-.venv/bin/python}"
CACHE="${HAMI_FAST_CACHE:-$HOME/.cache/hami-fast}/image"
OUT="dist/hami-fast-v$VERSION.oci.tar"
mkdir -p "$CACHE" dist

for tool in mmdebstrap buildah skopeo; do
  command -v "$tool" >/dev/null || { say "$tool not found: run scripts/install-image-tools.sh"; exit 1; }
done
WHEEL="${WHEEL:-$(ls -t dist/hami_fast-"$VERSION"-*.whl 2>/dev/null | head -1 || true)}"
[ -f "$WHEEL" ] || { say "no wheel in dist/: run make wheel"; exit 1; }

# ---- 1. base root filesystem ------------------------------------------------------------------
PACKAGES="$(grep -v '^#' deploy/image/base-packages.txt | xargs | tr ' ' ',')"
# merged-/usr set up by mmdebstrap's hook rather than the usrmerge package (which pulls in ~50 MB of perl).
MMDEBSTRAP_OPTS=(--variant=minbase --include="$PACKAGES" --format=tar --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
  --aptopt='APT::Install-Recommends "false"'
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*')
DEBIAN="${DEBIAN_MIRROR:-http://deb.debian.org}"
MIRRORS=("deb $DEBIAN/debian $SUITE main" "deb $DEBIAN/debian $SUITE-updates main"
  "deb $DEBIAN/debian-security $SUITE-security main")
BASE_KEY="$(printf '%s\n' "$SUITE" "$PACKAGES" "${MMDEBSTRAP_OPTS[@]}" "${MIRRORS[@]}" | sha256sum | cut -c1-16)"
BASE_TAR="$CACHE/base-$SUITE-$BASE_KEY.tar"
BASE_IMAGE="localhost/hami-fast-base:$SUITE-$BASE_KEY"
if [ ! -s "$BASE_TAR" ]; then
  say "mmdebstrap $SUITE ($PACKAGES) -> $BASE_TAR"
  mmdebstrap --quiet "${MMDEBSTRAP_OPTS[@]}" "$SUITE" "$BASE_TAR.tmp" "${MIRRORS[@]}" </dev/null >&2
  mv "$BASE_TAR.tmp" "$BASE_TAR"
fi
if ! buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  say "importing the base as $BASE_IMAGE"
  ctr="$(buildah from --quiet scratch)"
  buildah add --quiet "$ctr" "$BASE_TAR" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/sh "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
fi

# ---- 2. image, cached by the wheel's hash ---------------------------------------------------------
IMAGE_KEY="$( (sha256sum "$WHEEL" | cut -d' ' -f1; sha256sum deploy/image/Containerfile; echo "$BASE_KEY $IMAGE") \
  | sha256sum | cut -c1-16)"
CACHED="$CACHE/hami-fast-v$VERSION-$IMAGE_KEY.oci.tar"
if [ -s "$CACHED" ]; then
  say "cached image for $(basename "$WHEEL") ($IMAGE_KEY)"
else
  CONTEXT="$(mktemp -d)"
  trap 'rm -rf "$CONTEXT"' EXIT
  mkdir "$CONTEXT/wheels"
  say "collecting the dependency wheels of $(basename "$WHEEL")"
  "$PYTHON" -m pip wheel --quiet --wheel-dir "$CONTEXT/wheels" "$WHEEL" >&2
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$CONTEXT/wheels" pip >&2
  say "buildah build --isolation chroot -> $IMAGE"
  buildah build --quiet --isolation chroot --layers=false --pull=never \
    --build-arg BASE="$BASE_IMAGE" -f deploy/image/Containerfile -t "$IMAGE" "$CONTEXT" >&2
  rm -f "$CACHED.tmp"
  buildah push --quiet "$IMAGE" "oci-archive:$CACHED.tmp:$IMAGE" >&2
  mv "$CACHED.tmp" "$CACHED"
fi
cp "$CACHED" "$OUT"
say "$OUT ($(du -m "$OUT" | cut -f1) MB archive) = $IMAGE"
echo "$OUT"
