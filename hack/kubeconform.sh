#!/usr/bin/env bash
# Validate every manifest Paddock ships, strictly and offline, with kubeconform: the chart
# rendered with its defaults and with every toggle, config/default as kustomize builds it,
# and examples/. Schemas come from the Kubernetes OpenAPI document of the version the local
# control plane is built from, the project's CRDs (and the chart's peering CRDs), and the
# prometheus-operator ServiceMonitor CRD, all through the Go module proxy and cached.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECONFORM_VERSION="${PADDOCK_KUBECONFORM_VERSION:-v0.8.0}"
K8S_VERSION="${PADDOCK_K8S_VERSION:-v1.34.4}"
PROMETHEUS_OPERATOR_VERSION="${PADDOCK_PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
CACHE="${PADDOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}"
PY="${PY:-.venv/bin/python}"
dir="$CACHE/kubeconform/$KUBECONFORM_VERSION"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
log() { printf '[kubeconform %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
module_dir() {
  (cd "$(mktemp -d)" && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
}

mkdir -p "$CACHE/kubeconform"
exec 9>"$CACHE/kubeconform/.lock"
flock 9
if [ ! -e "$dir/.complete" ]; then
  log "building kubeconform $KUBECONFORM_VERSION through the Go module proxy"
  mkdir -p "$dir"
  GOBIN="$dir" go install -trimpath -ldflags "-s -w" \
    "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
  touch "$dir/.complete"
fi
exec 9>&-

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
helm=$(hack/helm.sh | sed -n 's/^HELM=//p')
kubectl="$CACHE/k8s/$K8S_VERSION/kubectl"
[ -x "$kubectl" ] || hack/k8s-binaries.sh >&2  # kubectl builds config/default (cached)
swagger="$(module_dir "k8s.io/kubernetes@$K8S_VERSION")/api/openapi-spec/swagger.json"
monitors="$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")"
monitors="$monitors/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"

render() { "$helm" template paddock charts/paddock --kube-version="${K8S_VERSION#v}" "$@"; }
render > "$work/chart-defaults.yaml"
render --values charts/paddock/ci/all-toggles-values.yaml > "$work/chart-all-toggles.yaml"
"$kubectl" kustomize config/default > "$work/config-default.yaml"

"$PY" -m paddock_dev.schemas "$work/schemas" "$swagger" crds/*.yaml "$monitors" \
  "$work/chart-all-toggles.yaml"
mapfile -t examples < <(ls examples/*.yaml | grep -v kustomization.yaml)
# PADDOCK_KUBECONFORM_EXTRA: one more manifest file to check (the test of this check uses it).
"$dir/kubeconform" -strict -summary -output text \
  -schema-location "$work/schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  "$work"/chart-*.yaml "$work/config-default.yaml" "${examples[@]}" \
  ${PADDOCK_KUBECONFORM_EXTRA:+"$PADDOCK_KUBECONFORM_EXTRA"}
