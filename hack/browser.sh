#!/usr/bin/env bash
# Install, from Debian's packages, the browser the console's tests drive (through Playwright's
# Python package, with this executable): Chromium. Idempotent; without root it installs nothing
# and says so, and the console's browser test then fails saying what to run.
set -euo pipefail

log() { printf '[browser %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  log "installed: chromium"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  log "chromium is missing, and not root: install Debian's chromium package to run the console's browser test"
  exit 0
fi
log "installing chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
log "installed: chromium"
