#!/usr/bin/env bash
# Install, once, the real agent CLIs that the integration tests run (hack/agent-clis/
# package.json pins their versions; package-lock.json pins everything else) from the npm
# registry, and cache them outside the repository, keyed on the lock file:
#
#   $PADDOCK_CACHE/agent-clis/<lock hash>/node_modules/.bin/{claude,codex}
#
# Idempotent and safe when two runs race (flock). Prints BIN=<dir> on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agent-clis"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"
key="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)"
dir="$CACHE/agent-clis/$key"

log() { printf '[agent-clis %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mkdir -p "$CACHE/agent-clis"
exec 9>"$CACHE/agent-clis/.lock"
flock 9
if [ ! -e "$dir/.complete" ]; then
  command -v npm >/dev/null || { log "npm is needed to install the agent CLIs"; exit 1; }
  log "installing $(tr -d '\n ' < "$here/package.json" | grep -o '"dependencies":{[^}]*}') into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  "$dir/node_modules/.bin/claude" --version >&2
  "$dir/node_modules/.bin/codex" --version >&2
  touch "$dir/.complete"
fi
echo "BIN=$dir/node_modules/.bin"
