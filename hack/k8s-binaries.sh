#!/usr/bin/env bash
# Build, once, the binaries of Paddock's local Kubernetes control plane through the Go module
# proxy, and cache them outside the repository, keyed on their versions:
#
#   $PADDOCK_CACHE/k8s/<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   $PADDOCK_CACHE/etcd/<version>/etcd
#   $PADDOCK_CACHE/kwok/<version>/kwok
#
# Idempotent (a component already built is skipped) and safe when two runs race (flock).
# A cold build takes many minutes on two cores; progress goes to stderr.
# Prints the three directories, one per line, as KEY=DIR on stdout.
set -euo pipefail

K8S_VERSION="${PADDOCK_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${PADDOCK_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${PADDOCK_KWOK_VERSION:-v0.7.0}"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"

log() { printf '[k8s-binaries %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

k8s_dir="$CACHE/k8s/$K8S_VERSION"
etcd_dir="$CACHE/etcd/$ETCD_VERSION"
kwok_dir="$CACHE/kwok/$KWOK_VERSION"
mkdir -p "$CACHE"

exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.build.lock; waiting for it"
  flock 9
fi

# A component counts as built only when its .complete marker exists, written after every
# binary is in place, so an interrupted build is redone rather than half-used.
build_kubernetes() {
  [ -f "$k8s_dir/.complete" ] && { log "kubernetes $K8S_VERSION: cached in $k8s_dir"; return; }
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local staging_version="v0.${K8S_VERSION#v1.}"
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  log "kubernetes $K8S_VERSION: building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (cold: 10-25 min)"
  # k8s.io/kubernetes pins its staging modules at v0.0.0; a wrapper module replaces each one
  # with its published release so that the commands build from the module proxy.
  {
    echo "module paddock.dev/k8s-wrapper"
    echo "go 1.24.0"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    local m
    for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
        cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
        cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
        kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
        mount-utils pod-security-admission sample-apiserver; do
      echo "replace k8s.io/$m => k8s.io/$m $staging_version"
    done
  } >"$work/go.mod"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  mkdir -p "$work/bin"
  (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$work/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  mkdir -p "$k8s_dir" && mv "$work"/bin/* "$k8s_dir/" && touch "$k8s_dir/.complete"
  log "kubernetes $K8S_VERSION: done"
}

build_etcd() {
  [ -f "$etcd_dir/.complete" ] && { log "etcd $ETCD_VERSION: cached in $etcd_dir"; return; }
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  log "etcd $ETCD_VERSION: building (cold: 2-5 min)"
  # etcd's server module uses relative replace directives that the proxy cannot honour; the
  # wrapper pins its sibling modules to the same release instead.
  cat >"$work/go.mod" <<MOD
module paddock.dev/etcd-wrapper
go 1.26.0
require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
MOD
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$work/etcd" go.etcd.io/etcd/server/v3)
  mkdir -p "$etcd_dir" && mv "$work/etcd" "$etcd_dir/etcd" && touch "$etcd_dir/.complete"
  log "etcd $ETCD_VERSION: done"
}

build_kwok() {
  [ -f "$kwok_dir/.complete" ] && { log "kwok $KWOK_VERSION: cached in $kwok_dir"; return; }
  log "kwok $KWOK_VERSION: building (cold: 2-5 min)"
  mkdir -p "$kwok_dir"
  GOBIN="$kwok_dir" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  touch "$kwok_dir/.complete"
  log "kwok $KWOK_VERSION: done"
}

start=$SECONDS
build_etcd
build_kwok
build_kubernetes
log "all binaries ready after $((SECONDS - start))s ($(du -sh "$CACHE" | cut -f1) in $CACHE)"

echo "K8S_BIN=$k8s_dir"
echo "ETCD_BIN=$etcd_dir"
echo "KWOK_BIN=$kwok_dir"
