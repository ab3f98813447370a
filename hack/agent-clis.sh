#!/usr/bin/env bash
# Install, once, the real agent CLIs that the integration tests run from the npm registry, at
# the exact versions hack/agent-clis/package.json pins (each CLI pins its own platform
# binary package exactly), and cache them outside the repository, keyed on that file:
#
#   $PADDOCK_CACHE/agent-clis/<lock hash>/node_modules/.bin/{claude,codex,opencode,gemini}
#
# Idempotent and safe when two runs race (flock). Prints BIN=<dir> on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agent-clis"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"
key="$(sha256sum < "$here/package.json" | cut -c1-16)"
dir="$CACHE/agent-clis/$key"

log() { printf '[agent-clis %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mkdir -p "$CACHE/agent-clis"
exec 9>"$CACHE/agent-clis/.lock"
flock 9
if [ ! -e "$dir/.complete" ]; then
  command -v npm >/dev/null || { log "npm is needed to install the agent CLIs"; exit 1; }
  log "installing $(tr -d '\n ' < "$here/package.json" | grep -o '"dependencies":{[^}]*}') into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$here/package.json" "$dir/"
  (cd "$dir" && npm install --no-package-lock --no-audit --no-fund --loglevel=error >&2)
  "$dir/node_modules/.bin/claude" --version >&2
  "$dir/node_modules/.bin/codex" --version >&2
  "$dir/node_modules/.bin/opencode" --version >&2
  "$dir/node_modules/.bin/gemini" --version >&2
  touch "$dir/.complete"
fi
echo "BIN=$dir/node_modules/.bin"
