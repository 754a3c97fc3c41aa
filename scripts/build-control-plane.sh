#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kube-scheduler, etcd) from Go modules
# at pinned versions, cached outside git so that later runs reuse it.
#
#   scripts/build-control-plane.sh          -> prints the folder holding the three binaries
#
# Kubernetes: k8s.io/kubernetes's published go.mod lists its ~30 staging modules at v0.0.0, so a
# plain `go install k8s.io/kubernetes/cmd/...@vX` fails. We generate a small wrapper module that
# requires k8s.io/kubernetes vX.Y.Z plus one `replace k8s.io/<staging> => k8s.io/<staging> v0.Y.Z`
# line per staging module (read from the monorepo's own go.mod), then `go build` the commands.
# etcd: Debian's etcd-server if it is installed (or installable), otherwise the etcd server module.
set -euo pipefail
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE="${HAMI_FAST_CACHE:-$HOME/.cache/hami-fast}"
DEST="$CACHE/bin/k8s-$K8S_VERSION"
WORK="$CACHE/build/k8s-$K8S_VERSION"
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
log() { echo "build-control-plane: $*" >&2; }

have() { [[ -x "$DEST/$1" ]]; }

mkdir -p "$DEST" "$WORK"
staging_minor="v0.${K8S_VERSION#v1.}"

if ! have kube-apiserver || ! have kube-scheduler; then
  start=$(date +%s)
  log "resolving k8s.io/kubernetes $K8S_VERSION (staging modules at $staging_minor)"
  gomod=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # Staging modules are the `k8s.io/x => ./staging/src/k8s.io/x` replace lines of the monorepo.
  mapfile -t staging < <(grep -oE '^\s*k8s\.io/[A-Za-z0-9_.-]+ => \./staging/src/k8s\.io/[A-Za-z0-9_.-]+' "$gomod" | awk '{print $1}' | sort -u)
  if [[ ${#staging[@]} -eq 0 ]]; then log "found no staging replace lines in $gomod"; exit 1; fi
  goline=$(grep -E '^go [0-9.]+' "$gomod" | head -1)
  {
    echo "module hami-fast/k8s-build"
    echo
    echo "$goline"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	$m => $m $staging_minor"; done
    echo ")"
  } > "$WORK/go.mod"
  cat > "$WORK/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
  log "wrapper module with ${#staging[@]} replace lines in $WORK"
  (cd "$WORK" && GOFLAGS=-mod=mod go mod tidy -e >&2 || true)
  for cmd in kube-apiserver kube-scheduler; do
    if have "$cmd"; then continue; fi
    t0=$(date +%s)
    log "go build $cmd ..."
    (cd "$WORK" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w \
        -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
        -X k8s.io/component-base/version.gitMajor=1 \
        -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#v1.} \
        -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" \
        -o "$DEST/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2)
    mv "$DEST/$cmd.tmp" "$DEST/$cmd"
    log "$cmd built in $(( $(date +%s) - t0 ))s"
  done
  log "kubernetes binaries built in $(( $(date +%s) - start ))s"
fi

if ! have etcd; then
  if [[ -x /usr/bin/etcd ]]; then
    ln -sf /usr/bin/etcd "$DEST/etcd"
    log "etcd: using Debian's /usr/bin/etcd"
  elif [[ "${ETCD_FROM_APT:-1}" == 1 ]] && command -v apt-get >/dev/null && \
       { DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >&2 2>/dev/null || \
         { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >&2; }; } && \
       [[ -x /usr/bin/etcd ]]; then
    # Debian's package enables an etcd service on install; we only want the binary.
    (systemctl disable --now etcd >/dev/null 2>&1 || service etcd stop >/dev/null 2>&1 || true)
    ln -sf /usr/bin/etcd "$DEST/etcd"
    log "etcd: installed Debian's etcd-server"
  else
    t0=$(date +%s)
    ew="$CACHE/build/etcd-$ETCD_VERSION"
    mkdir -p "$ew"
    cat > "$ew/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    printf 'module hami-fast/etcd-build\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$ew/go.mod"
    (cd "$ew" && GOFLAGS=-mod=mod go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -o "$DEST/etcd" . >&2)
    log "etcd $ETCD_VERSION built from its module in $(( $(date +%s) - t0 ))s"
  fi
fi
echo "$DEST"
