#!/usr/bin/env bash
# Build, once, the binaries of Paddock's local Kubernetes control plane through the Go module
# proxy, and cache them outside the repository, keyed on their versions:
#
#   $PADDOCK_CACHE/k8s/<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   $PADDOCK_CACHE/etcd/<version>/etcd
#   $PADDOCK_CACHE/kwok/<version>/kwok          (and kwok's own CRDs, under crds/)
#   $PADDOCK_CACHE/snapshot-crds/<version>/     (the VolumeSnapshot CRDs)
#   $PADDOCK_CACHE/snapshot-controller/<version>/snapshot-controller   (serves VolumeSnapshots)
#   $PADDOCK_CACHE/kubelet/<version>/kubelet    (the real node, same release as the control plane)
#   $PADDOCK_CACHE/local-path-provisioner/<version>/local-path-provisioner   (its storage)
#   $PADDOCK_CACHE/network-policies/<version>/paddock-network-policies   (its NetworkPolicies)
#   $PADDOCK_CACHE/versitygw/<version>/versitygw   (the S3-compatible object store, POSIX backend)
#   $PADDOCK_CACHE/gitea/<version>/gitea        (the git forge deliveries are tested against;
#                                                only with PADDOCK_FORGE=1: `make dev` never starts it)
#   $PADDOCK_CACHE/flux/<version>/{source-controller,kustomize-controller} and crds/
#                                               (Flux, which the GitOps tests reconcile a forge's
#                                                repository with; only with PADDOCK_FLUX=1)
#
# Idempotent (a component already built is skipped) and safe when two runs race (flock).
# A cold build takes many minutes on two cores; progress goes to stderr.
# Prints the directories, one per line, as KEY=DIR on stdout.
set -euo pipefail

K8S_VERSION="${PADDOCK_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${PADDOCK_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${PADDOCK_KWOK_VERSION:-v0.7.0}"
SNAPSHOTTER_VERSION="${PADDOCK_SNAPSHOTTER_VERSION:-v8.7.0}"
LOCAL_PATH_VERSION="${PADDOCK_LOCAL_PATH_VERSION:-v0.0.30}"
NETWORK_POLICIES_VERSION="${PADDOCK_NETWORK_POLICIES_VERSION:-v0.8.0}"
VERSITYGW_VERSION="${PADDOCK_VERSITYGW_VERSION:-v1.8.0}"
GITEA_VERSION="${PADDOCK_GITEA_VERSION:-v1.27.3}"
# Flux's source-controller and kustomize-controller: the newest release whose modules need no
# newer Go than this machine's (v1.10 needs Go 1.27).
FLUX_VERSION="${PADDOCK_FLUX_VERSION:-v1.9.6}"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"

log() { printf '[k8s-binaries %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

k8s_dir="$CACHE/k8s/$K8S_VERSION"
etcd_dir="$CACHE/etcd/$ETCD_VERSION"
kwok_dir="$CACHE/kwok/$KWOK_VERSION-paddock.1"
snapshot_dir="$CACHE/snapshot-crds/$SNAPSHOTTER_VERSION"
snapshot_controller_dir="$CACHE/snapshot-controller/$SNAPSHOTTER_VERSION"
kubelet_dir="$CACHE/kubelet/$K8S_VERSION"
local_path_dir="$CACHE/local-path-provisioner/$LOCAL_PATH_VERSION"
versitygw_dir="$CACHE/versitygw/$VERSITYGW_VERSION"
gitea_dir="$CACHE/gitea/$GITEA_VERSION"
flux_dir="$CACHE/flux/$FLUX_VERSION"
network_policies_source="$(cd "$(dirname "$0")" && pwd)/network-policies"
network_policies_dir="$CACHE/network-policies/$NETWORK_POLICIES_VERSION-$(cat "$network_policies_source"/main.go \
  "$network_policies_source"/go.mod "$network_policies_source"/patch/*.go | sha256sum | cut -c1-8)-paddock.2"
csi_node_source="$(cd "$(dirname "$0")" && pwd)/csi-node"
csi_node_dir="$CACHE/csi-node/$(cat "$csi_node_source"/main.go "$csi_node_source"/go.mod \
  "$csi_node_source"/go.sum | sha256sum | cut -c1-8)"
mkdir -p "$CACHE"

exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.build.lock; waiting for it"
  flock 9
fi

# A component counts as built only when its .complete marker exists, written after every
# binary is in place, so an interrupted build is redone rather than half-used.
# k8s.io/kubernetes pins its staging modules at v0.0.0; a wrapper module replaces each one with
# its published release so that the commands build from the module proxy.
k8s_wrapper_module() {
  local staging_version="v0.${K8S_VERSION#v1.}" m
  echo "module paddock.dev/k8s-wrapper"
  echo "go 1.24.0"
  echo "require k8s.io/kubernetes $K8S_VERSION"
  for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
      cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
      cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
      kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
      mount-utils pod-security-admission sample-apiserver; do
    echo "replace k8s.io/$m => k8s.io/$m $staging_version"
  done
}

# Build k8s.io/kubernetes commands ($3...) into directory $2, which is marked complete after.
build_k8s_commands() {
  local what="$1" dir="$2"; shift 2
  [ -f "$dir/.complete" ] && { log "$what $K8S_VERSION: cached in $dir"; return; }
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local work; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  log "$what $K8S_VERSION: building $* (cold: the first Kubernetes build takes 10-25 min)"
  k8s_wrapper_module >"$work/go.mod"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  local packages=() command
  for command in "$@"; do packages+=("k8s.io/kubernetes/cmd/$command"); done
  mkdir -p "$work/bin"
  (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$work/bin/" "${packages[@]}")
  mkdir -p "$dir" && mv "$work"/bin/* "$dir/" && touch "$dir/.complete"
  log "$what $K8S_VERSION: done"
}

build_etcd() {
  [ -f "$etcd_dir/.complete" ] && { log "etcd $ETCD_VERSION: cached in $etcd_dir"; return; }
  local work; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
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

# The directory of a module version in the module cache, downloading it when needed.
module_dir() {
  (cd "$(mktemp -d)" && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
}

# kwok runs pods/exec as local processes, but hands the API server's remotecommand handler a
# wrapped error, which that handler only recognises unwrapped: every non-zero exit becomes
# "internal error" and exit code 1 for the client. Paddock needs real exit codes, so kwok is
# built from its module source with one added file that passes the exit code through
# (k8s.io/utils/exec.CodeExitError), and one call site changed to use it.
build_kwok() {
  [ -f "$kwok_dir/.complete" ] && { log "kwok $KWOK_VERSION: cached in $kwok_dir"; return; }
  log "kwok $KWOK_VERSION: building, with exec exit codes passed through (cold: 2-5 min)"
  local work src; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  src="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
  cp -r "$src" "$work/kwok" && chmod -R u+w "$work/kwok"
  cat >"$work/kwok/pkg/kwok/server/paddock_exit_code.go" <<'GO'
package server

import (
	"errors"
	osexec "os/exec"

	utilexec "k8s.io/utils/exec"
)

// withExitCode unwraps a command's exit status so that the remotecommand handler reports it
// as the exit code of the exec instead of an internal error. Added by Paddock's build.
func withExitCode(err error) error {
	var exitErr *osexec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() >= 0 {
		return utilexec.CodeExitError{Err: err, Code: exitErr.ExitCode()}
	}
	return err
}
GO
  local call='return s.execInContainer(ctx, cmd, in, out, errOut)'
  grep -qF "$call" "$work/kwok/pkg/kwok/server/debugging_exec.go" \
    || { log "kwok $KWOK_VERSION: exec call site not found; update the patch"; exit 1; }
  sed -i "s/$call/return withExitCode(s.execInContainer(ctx, cmd, in, out, errOut))/" \
    "$work/kwok/pkg/kwok/server/debugging_exec.go"
  mkdir -p "$kwok_dir/crds"
  (cd "$work/kwok" && go build -trimpath -ldflags "-s -w" -o "$kwok_dir/kwok" ./cmd/kwok)
  # kwok's Exec CRD lets the local cluster give each pod its own exec working directory.
  cp "$src"/kustomize/crd/bases/*.yaml "$kwok_dir/crds/"
  touch "$kwok_dir/.complete"
  log "kwok $KWOK_VERSION: done"
}

# The real node's storage: rancher's local-path-provisioner (csi-driver-host-path, which would
# also serve VolumeSnapshots, is not on the module proxy). Module zips carry no vendor/ tree,
# so its dependencies come from the proxy.
build_local_path_provisioner() {
  [ -f "$local_path_dir/.complete" ] && { log "local-path-provisioner $LOCAL_PATH_VERSION: cached"; return; }
  log "local-path-provisioner $LOCAL_PATH_VERSION: building (cold: 1-2 min)"
  local work src; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  src="$(module_dir "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION")"
  cp -r "$src" "$work/src" && chmod -R u+w "$work/src" && rm -rf "$work/src/vendor"
  mkdir -p "$local_path_dir"
  (cd "$work/src" && go build -trimpath -ldflags "-s -w" \
      -o "$local_path_dir/local-path-provisioner" .)
  touch "$local_path_dir/.complete"
  log "local-path-provisioner $LOCAL_PATH_VERSION: done"
}

# The real node's NetworkPolicy enforcement: kube-network-policies' controller, run by a small
# command of Paddock's own (hack/network-policies/main.go) that names its nftables table after
# the cluster and reads a kubeconfig (the upstream command does neither). Its rules' queue
# statement needs CONFIG_NFT_QUEUE, which not every kernel has (this project's CI machine's does
# not); one added file (hack/network-policies/patch) gives them the x_tables NFQUEUE target.
build_network_policies() {
  [ -f "$network_policies_dir/.complete" ] && { log "kube-network-policies $NETWORK_POLICIES_VERSION: cached"; return; }
  log "kube-network-policies $NETWORK_POLICIES_VERSION: building, with its queue as an x_tables target (cold: 1-2 min)"
  local work src; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  src="$(module_dir "sigs.k8s.io/kube-network-policies@$NETWORK_POLICIES_VERSION")"
  cp -r "$src" "$work/kube-network-policies" && chmod -R u+w "$work/kube-network-policies"
  local package="$work/kube-network-policies/pkg/networkpolicy"
  cp "$network_policies_source"/patch/*.go "$package/"
  local queue='queue := &expr.Queue{Num: uint16(c.config.QueueID)}'
  [ "$(grep -cF "$queue" "$package/controller.go")" -eq 2 ] \
    || { log "kube-network-policies $NETWORK_POLICIES_VERSION: queue statements not found; update the patch"; exit 1; }
  # Each of the two queue statements, with its fail-open flag, becomes the x_tables target.
  perl -0pi -e 's/queue := &expr\.Queue\{Num: uint16\(c\.config\.QueueID\)\}\n\tif c\.config\.FailOpen \{\n\t\tqueue\.Flag = expr\.QueueFlagBypass\n\t\}/queue := xtQueue(c.config.QueueID, c.config.FailOpen)/g' \
    "$package/controller.go"
  # With NRI off, the controller has no NRI plugin, yet asks it about every address that is no
  # pod's (a pod's connection to the node): a nil dereference. Ask only a plugin that exists.
  local nri='podKey := c.nriPlugin.GetPodFromIP(podIP)'
  [ "$(grep -cF "$nri" "$package/controller.go")" -eq 1 ] \
    || { log "kube-network-policies $NETWORK_POLICIES_VERSION: NRI lookup not found; update the patch"; exit 1; }
  perl -0pi -e 's/(\t+)podKey := c\.nriPlugin\.GetPodFromIP\(podIP\)/$1if c.nriPlugin == nil {\n$1\treturn nil\n$1}\n$1podKey := c.nriPlugin.GetPodFromIP(podIP)/' \
    "$package/controller.go"
  cp "$network_policies_source"/main.go "$network_policies_source"/go.mod "$work/"
  echo "replace sigs.k8s.io/kube-network-policies => ./kube-network-policies" >>"$work/go.mod"
  mkdir -p "$network_policies_dir"
  (cd "$work" && go build -trimpath -buildvcs=false -ldflags "-s -w" \
      -o "$network_policies_dir/paddock-network-policies" .)
  touch "$network_policies_dir/.complete"
  log "kube-network-policies $NETWORK_POLICIES_VERSION: done"
}

# The real node's CSI node plugin (ours, hack/csi-node): registers with the kubelet and
# bind-mounts the local driver's volume directories into pods.
build_csi_node() {
  [ -f "$csi_node_dir/.complete" ] && { log "csi-node: cached"; return; }
  log "csi-node: building (cold: about 1 min)"
  mkdir -p "$csi_node_dir"
  (cd "$csi_node_source" && go build -trimpath -buildvcs=false -ldflags "-s -w" \
      -o "$csi_node_dir/paddock-csi-node" .)
  touch "$csi_node_dir/.complete"
  log "csi-node: done"
}

# external-snapshotter's snapshot controller. Its go.mod replaces its client module with the
# directory next to it and pins Kubernetes' staging modules; go install refuses replace
# directives, so a wrapper repeats them, with the client module at the same release.
build_snapshot_controller() {
  [ -f "$snapshot_controller_dir/.complete" ] && { log "snapshot-controller $SNAPSHOTTER_VERSION: cached"; return; }
  log "snapshot-controller $SNAPSHOTTER_VERSION: building (cold: 1-3 min)"
  local work src module=github.com/kubernetes-csi/external-snapshotter
  work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  src="$(module_dir "$module/v8@$SNAPSHOTTER_VERSION")"
  {
    echo "module paddock.dev/snapshot-controller-wrapper"
    echo "go 1.26.0"
    echo "require $module/v8 $SNAPSHOTTER_VERSION"
    echo "replace $module/client/v8 => $module/client/v8 $SNAPSHOTTER_VERSION"
    grep '^replace ' "$src/go.mod" | grep -v '=> \./'
  } >"$work/go.mod"
  mkdir -p "$snapshot_controller_dir"
  (cd "$work" && go build -trimpath -buildvcs=false -ldflags "-s -w" \
      -o "$snapshot_controller_dir/snapshot-controller" "$module/v8/cmd/snapshot-controller")
  touch "$snapshot_controller_dir/.complete"
  log "snapshot-controller $SNAPSHOTTER_VERSION: done"
}

# The object store of run logs and portable snapshots: Versity's S3 gateway (Apache-2.0) over a
# directory (its POSIX backend).
build_versitygw() {
  [ -f "$versitygw_dir/.complete" ] && { log "versitygw $VERSITYGW_VERSION: cached"; return; }
  log "versitygw $VERSITYGW_VERSION: building (cold: about 1 min)"
  mkdir -p "$versitygw_dir"
  GOBIN="$versitygw_dir" go install -trimpath -ldflags "-s -w" \
    "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
  touch "$versitygw_dir/.complete"
  log "versitygw $VERSITYGW_VERSION: done"
}

# The git forge that deliveries (AgentRun spec.deliver) are tested against: Gitea (MIT), SQLite
# through its pure-Go driver. Its module declares the path gitea.dev, so it is built in a copy
# of its source rather than by go install; without bindata it reads its options (locales) and
# templates at run time, which are kept beside it.
build_gitea() {
  [ -f "$gitea_dir/.complete" ] && { log "gitea $GITEA_VERSION: cached"; return; }
  log "gitea $GITEA_VERSION: building (cold: 2-4 min)"
  local work src; work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  src="$(module_dir "code.gitea.io/gitea@$GITEA_VERSION")"
  cp -r "$src" "$work/gitea" && chmod -R u+w "$work/gitea"
  mkdir -p "$gitea_dir"
  (cd "$work/gitea" && go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$gitea_dir/gitea" .)
  rm -rf "$gitea_dir/options" "$gitea_dir/templates"
  cp -r "$work/gitea/options" "$work/gitea/templates" "$gitea_dir/"
  touch "$gitea_dir/.complete"
  log "gitea $GITEA_VERSION: done"
}

# Flux's source-controller and kustomize-controller, and their CRDs. Each main module replaces
# its api module with the directory next to it; go install refuses replace directives, so a
# wrapper module requires both at the same release and repeats the others. source-controller
# asks for github.com/fluxcd/pkg/artifact v0.18.3, which the module proxy here does not serve:
# the wrapper takes v0.18.1, the patch release before it.
build_flux() {
  [ -f "$flux_dir/.complete" ] && { log "flux $FLUX_VERSION: cached"; return; }
  log "flux $FLUX_VERSION: building source-controller and kustomize-controller (cold: 3-5 min)"
  local work controller src module
  work=$(mktemp -d); trap 'rm -rf "$work"; trap - RETURN' RETURN
  mkdir -p "$flux_dir/crds"
  for controller in source-controller kustomize-controller; do
    module="github.com/fluxcd/$controller"
    src="$(module_dir "$module@$FLUX_VERSION")"
    mkdir -p "$work/$controller"
    (
      cd "$work/$controller"
      go mod init "paddock.dev/flux-$controller-wrapper" 2>/dev/null
      go mod edit -go=1.26.0 -require="$module@$FLUX_VERSION" -require="$module/api@$FLUX_VERSION"
      # the main module's replace directives (one per line, or in a block) but a directory's
      awk '/^replace \(/ { block = 1; next } block && /^\)/ { block = 0; next }
           /^replace / { sub(/^replace /, ""); print; next } block && !/^[[:space:]]*(\/\/|$)/' \
          "$src/go.mod" | grep -v '=> *\./' | while read -r old arrow new version; do
        go mod edit -replace="$old=$new@$version"
      done
      if [ "$controller" = source-controller ]; then
        go mod edit -replace=github.com/fluxcd/pkg/artifact=github.com/fluxcd/pkg/artifact@v0.18.1
      fi
      go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$flux_dir/$controller" "$module"
    )
    cp "$src"/config/crd/bases/*.yaml "$flux_dir/crds/"
  done
  touch "$flux_dir/.complete"
  log "flux $FLUX_VERSION: done"
}

fetch_snapshot_crds() {
  [ -f "$snapshot_dir/.complete" ] && { log "VolumeSnapshot CRDs $SNAPSHOTTER_VERSION: cached"; return; }
  log "VolumeSnapshot CRDs $SNAPSHOTTER_VERSION: fetching"
  mkdir -p "$snapshot_dir"
  local dir
  dir="$(module_dir "github.com/kubernetes-csi/external-snapshotter/client/v8@$SNAPSHOTTER_VERSION")"
  cp "$dir"/config/crd/snapshot.storage.k8s.io_*.yaml "$snapshot_dir/"
  touch "$snapshot_dir/.complete"
}

start=$SECONDS
took=()
# Run one part; a part that built (not cached) has its time recorded for the summary.
timed() {
  local began=$SECONDS name="$1"; shift
  "$@"
  if [ $((SECONDS - began)) -gt 1 ]; then took+=("$name $((SECONDS - began))s"); fi
}
timed etcd build_etcd
timed kwok build_kwok
timed kubernetes build_k8s_commands kubernetes "$k8s_dir" kube-apiserver kube-controller-manager kube-scheduler kubectl
# The real node's kubelet (its own cache entry, so that a control plane cached before the real
# node existed is not rebuilt) and storage: only where a real node can run, as root.
real_node_off() { case "${PADDOCK_REAL_NODE:-auto}" in 0|false|off|no) return 0 ;; esac; return 1; }
if [ "$(id -u)" -eq 0 ] && ! real_node_off; then
  timed kubelet build_k8s_commands kubelet "$kubelet_dir" kubelet
  timed local-path-provisioner build_local_path_provisioner
  timed kube-network-policies build_network_policies
  timed csi-node build_csi_node
else
  log "kubelet, local-path-provisioner, kube-network-policies, csi-node: skipped (the real node needs root; PADDOCK_REAL_NODE=${PADDOCK_REAL_NODE:-auto})"
fi
timed snapshot-crds fetch_snapshot_crds
timed snapshot-controller build_snapshot_controller
timed versitygw build_versitygw
if [ "${PADDOCK_FORGE:-0}" = 1 ]; then
  timed gitea build_gitea
else
  log "gitea: skipped (built with PADDOCK_FORGE=1, as the delivery tests ask)"
fi
if [ "${PADDOCK_FLUX:-0}" = 1 ]; then
  timed flux build_flux
else
  log "flux: skipped (built with PADDOCK_FLUX=1, as the GitOps tests ask)"
fi
if [ ${#took[@]} -gt 0 ]; then
  log "built: $(IFS=,; echo "${took[*]}" | sed 's/,/, /g')"
fi
log "all binaries ready after $((SECONDS - start))s ($(du -sh "$CACHE" | cut -f1) in $CACHE)"

echo "K8S_BIN=$k8s_dir"
echo "ETCD_BIN=$etcd_dir"
echo "KWOK_BIN=$kwok_dir"
echo "SNAPSHOT_CRDS=$snapshot_dir"
echo "SNAPSHOT_CONTROLLER_BIN=$snapshot_controller_dir"
echo "KUBELET_BIN=$kubelet_dir"
echo "LOCAL_PATH_BIN=$local_path_dir"
echo "NETWORK_POLICIES_BIN=$network_policies_dir"
echo "CSI_NODE_BIN=$csi_node_dir"
echo "VERSITYGW_BIN=$versitygw_dir"
echo "GITEA_BIN=$gitea_dir"
echo "FLUX_BIN=$flux_dir"
