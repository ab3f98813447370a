#!/usr/bin/env bash
# Build, once, the helm CLI through the Go module proxy and cache it outside the repository:
#
#   $PADDOCK_CACHE/helm/<version>/helm
#
# Idempotent and safe when two runs race (flock). A cold build takes several minutes on two
# cores. Prints HELM=<path> on stdout.
set -euo pipefail

HELM_VERSION="${PADDOCK_HELM_VERSION:-v3.22.0}"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"
dir="$CACHE/helm/$HELM_VERSION"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"

log() { printf '[helm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mkdir -p "$CACHE/helm"
exec 9>"$CACHE/helm/.lock"
flock 9
if [ ! -e "$dir/.complete" ]; then
  log "building helm $HELM_VERSION through the Go module proxy (several minutes)"
  mkdir -p "$dir"
  GOBIN="$dir" go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  "$dir/helm" version --short >&2
  touch "$dir/.complete"
fi
echo "HELM=$dir/helm"
