#!/usr/bin/env bash
# Install, from Debian's packages, what the local cluster's real node runs on: containerd, runc,
# the CNI plugins, iptables, and nftables (for its NetworkPolicy controller); debootstrap and a
# static C library build its images; Squid (with OpenSSL, to peek at TLS) and socat (its helper's
# relay) make the egress gateway.
# Idempotent. Without root it installs nothing and says so: the cluster then runs kwok only.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables nftables debootstrap gcc libc6-dev git
  squid-openssl socat)

log() { printf '[node-packages %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  log "installed: ${packages[*]}"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  log "missing ${missing[*]}, and not root: the local cluster will run without its real node"
  exit 0
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Installed, not started: a package's service (Squid's, on port 3128) would outlive the install.
blocker=/usr/sbin/policy-rc.d
if [ ! -e "$blocker" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$blocker"
  chmod 755 "$blocker"
  trap 'rm -f "$blocker"' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed: ${packages[*]}"
