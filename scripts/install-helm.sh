#!/usr/bin/env bash
# Build helm from its Go module at a pinned version and cache the binary outside git.
#   scripts/install-helm.sh            -> prints the path of the helm binary
# The binary lands in ${HAMI_FAST_CACHE:-$HOME/.cache/hami-fast}/bin/helm-<version>/helm and is
# reused by later runs. Needs only the Go toolchain and the Go module proxy.
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${HAMI_FAST_CACHE:-$HOME/.cache/hami-fast}"
DEST="$CACHE/bin/helm-$HELM_VERSION"
if [[ -x "$DEST/helm" ]] && "$DEST/helm" version --short >/dev/null 2>&1; then
  echo "$DEST/helm"
  exit 0
fi
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "install-helm: the Go toolchain is required" >&2; exit 1; }
mkdir -p "$DEST"
start=$(date +%s)
echo "install-helm: building helm $HELM_VERSION with $(go version) into $DEST" >&2
# CGO off: a static binary; -trimpath keeps it reproducible. The version ldflag makes
# `helm version` report the pinned version instead of "v3.x-dirty".
CGO_ENABLED=0 GOBIN="$DEST" GOFLAGS="${GOFLAGS:-} -trimpath" \
  go install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
echo "install-helm: built in $(( $(date +%s) - start ))s" >&2
"$DEST/helm" version --short >&2
echo "$DEST/helm"
