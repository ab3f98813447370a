#!/usr/bin/env bash
# Build, once, hack/gitops-health (kstatus, the library Flux's health checks compute with, and
# the Lua engine Argo CD runs health scripts in, over objects given on stdin) through the Go
# module proxy, and cache it outside the repository, keyed on its source:
#
#   $PADDOCK_CACHE/gitops-health/<hash>/paddock-gitops-health
#
# Idempotent and safe when two runs race (flock). A cold build takes a minute or two on two
# cores. Prints GITOPS_HEALTH=<path> on stdout.
set -euo pipefail

source_dir="$(cd "$(dirname "$0")" && pwd)/gitops-health"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"
dir="$CACHE/gitops-health/$(cat "$source_dir"/main.go "$source_dir"/go.mod "$source_dir"/go.sum \
  | sha256sum | cut -c1-8)"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"

log() { printf '[gitops-health %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mkdir -p "$CACHE/gitops-health"
exec 9>"$CACHE/gitops-health/.lock"
flock 9
if [ ! -e "$dir/.complete" ]; then
  log "building kstatus and gopher-lua's checker through the Go module proxy (a minute or two)"
  mkdir -p "$dir"
  (cd "$source_dir" && go build -trimpath -buildvcs=false -ldflags "-s -w" \
      -o "$dir/paddock-gitops-health" .)
  touch "$dir/.complete"
fi
echo "GITOPS_HEALTH=$dir/paddock-gitops-health"
