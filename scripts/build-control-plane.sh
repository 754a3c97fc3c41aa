#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kube-scheduler, etcd) from Go modules
# at pinned versions, cached outside git so that later runs reuse it.
#
#   scripts/build-control-plane.sh          -> prints the folder holding the three binaries
#   BUILD_CONTROLLER_MANAGER=1 scripts/build-control-plane.sh   also builds kube-controller-manager
# Pins: K8S_VERSION (default below). Cache: ${HAMI_FAST_CACHE:-~/.cache/hami-fast}/bin/k8s-<version>/
#
# Kubernetes: k8s.io/kubernetes's published go.mod lists its ~30 staging modules at v0.0.0, so a
# plain `go install k8s.io/kubernetes/cmd/...@vX` fails. We generate a small wrapper module that
# requires k8s.io/kubernetes vX.Y.Z plus one `replace k8s.io/<staging> => k8s.io/<staging> v0.Y.Z`
# line per staging module (read from the monorepo's own go.mod), then `go build` the commands.
# etcd: the etcd server module at the version Kubernetes depends on (default), or Debian's
# etcd-server with ETCD_SOURCE=apt.
set -euo pipefail
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE="${HAMI_FAST_CACHE:-$HOME/.cache/hami-fast}"
DEST="$CACHE/bin/k8s-$K8S_VERSION"
WORK="$CACHE/build/k8s-$K8S_VERSION"
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
log() { echo "build-control-plane: $*" >&2; }

have() { [[ -x "$DEST/$1" ]]; }

mkdir -p "$DEST" "$WORK"
staging_minor="v0.${K8S_VERSION#v1.}"

# kube-controller-manager only on request (Deployments/ReplicaSets in e2e tests of the descheduler).
CMDS=(kube-apiserver kube-scheduler)
[[ "${BUILD_CONTROLLER_MANAGER:-0}" == 1 ]] && CMDS+=(kube-controller-manager)
need=0
for cmd in "${CMDS[@]}"; do have "$cmd" || need=1; done

if [[ $need == 1 ]]; then
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
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  log "wrapper module with ${#staging[@]} replace lines in $WORK"
  (cd "$WORK" && GOFLAGS=-mod=mod go mod tidy -e >&2 || true)
  for cmd in "${CMDS[@]}"; do
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
  if [[ "${ETCD_SOURCE:-module}" == apt ]]; then
    # Debian's etcd-server (3.4 on Debian 12/13). The package may start an etcd service; only the
    # binary is used.
    if [[ ! -x /usr/bin/etcd ]]; then
      { DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >&2 || \
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >&2; }; }
      (systemctl disable --now etcd >/dev/null 2>&1 || service etcd stop >/dev/null 2>&1 || true)
    fi
    ln -sf /usr/bin/etcd "$DEST/etcd"
    log "etcd: Debian's /usr/bin/etcd"
  else
    # The etcd server at the version Kubernetes itself depends on, built inside the same wrapper
    # module (a three-line main calling etcdmain.Main), so it shares the module graph and cache.
    t0=$(date +%s)
    mkdir -p "$WORK/etcd"
    cat > "$WORK/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    (cd "$WORK" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$DEST/etcd.tmp" ./etcd >&2)
    mv "$DEST/etcd.tmp" "$DEST/etcd"
    log "etcd $(cd "$WORK" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) built in $(( $(date +%s) - t0 ))s"
  fi
fi
echo "$DEST"
