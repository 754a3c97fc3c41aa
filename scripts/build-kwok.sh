#!/usr/bin/env bash
# Build KWOK (sigs.k8s.io/kwok, the fake-node controller) from its Go module at a pinned version,
# cached outside git so that later runs reuse it; prints the binary's path.
#
#   scripts/build-kwok.sh        -> ~/.cache/hami-fast/bin/kwok-<version>/kwok
# Pin: KWOK_VERSION (default below). Cache: ${HAMI_FAST_CACHE:-~/.cache/hami-fast}/bin/kwok-<version>/
# KWOK's go.mod has no replace lines, so a plain `go install module/cmd/kwok@version` builds it
# (~2-4 min cold on 2 cores, most of it compiling client-go). Test tooling only: never in the product.
set -euo pipefail
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${HAMI_FAST_CACHE:-$HOME/.cache/hami-fast}"
DEST="$CACHE/bin/kwok-$KWOK_VERSION"
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
log() { echo "build-kwok: $*" >&2; }

if [[ ! -x "$DEST/kwok" ]]; then
  command -v go >/dev/null || { log "go not found (install Go, e.g. /usr/local/go)"; exit 1; }
  mkdir -p "$DEST"
  t0=$(date +%s)
  log "go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION ..."
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  mv "$tmp/kwok" "$DEST/kwok"
  log "kwok built in $(( $(date +%s) - t0 ))s"
fi
"$DEST/kwok" --version >/dev/null 2>&1 || { log "$DEST/kwok does not run"; exit 1; }
echo "$DEST/kwok"
