# Paddock — `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
IMAGE ?= localhost/paddock-operator:dev
PYTEST_ARGS ?=
# Test files run in this many processes at once (pytest-xdist; a file's tests stay together).
TEST_WORKERS ?= 3

##@ Setup

.PHONY: install
install: $(VENV)/.installed ## Create .venv and install Paddock with its development tools

$(VENV)/.installed: pyproject.toml devtools/pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -e ./devtools
	touch $@

.PHONY: k8s-binaries
k8s-binaries: ## Build and cache the local control plane's binaries, and the forge and Flux the tests use (cold: many minutes)
	PADDOCK_FORGE=1 PADDOCK_FLUX=1 hack/k8s-binaries.sh

.PHONY: browser
browser: ## Install Chromium from Debian's packages, the browser the console's tests drive (needs root)
	hack/browser.sh

.PHONY: node-packages
node-packages: ## Install the real node's Debian packages (containerd, runc, CNI plugins, nftables; needs root)
	hack/node-packages.sh

.PHONY: helm
helm: ## Build and cache the helm CLI through the Go module proxy (cold: several minutes)
	hack/helm.sh

.PHONY: gitops-health
gitops-health: ## Build and cache the GitOps health checker the tests use (kstatus and Argo CD's Lua engine; Go module proxy)
	hack/gitops-health.sh

.PHONY: agent-clis
agent-clis: ## Install and cache the pinned real agent CLIs the integration tests run (npm)
	hack/agent-clis.sh

##@ Development

.PHONY: fmt
fmt: install ## Format the code
	$(BIN)/ruff format operator devtools tests
	$(BIN)/ruff check --fix operator devtools tests

.PHONY: lint
lint: install ## Lint: ruff, the layers (import-linter), the Dockerfile (hadolint), every manifest (kubeconform)
	$(BIN)/ruff check operator devtools tests bench
	$(BIN)/ruff format --check operator devtools tests bench
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile images/sandbox/Dockerfile images/gateway/Dockerfile
	PY=$(PY) hack/kubeconform.sh

.PHONY: typecheck
typecheck: install ## Type-check with mypy --strict
	$(BIN)/mypy

.PHONY: crds
crds: install ## Regenerate crds/ from the API models
	$(BIN)/paddock crds

.PHONY: crds-check
crds-check: install ## Fail when crds/ differs from the API models
	$(BIN)/paddock crds --check

##@ Test

.PHONY: test
test: lint typecheck crds-check helm-lint test-prerequisites ## Everything CI runs: lint, types, CRDs, the chart, and every test suite
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

.PHONY: test-prerequisites
test-prerequisites: node-packages browser agent-clis k8s-binaries gitops-health ## What the suites need, installed or built where missing (idempotent; quick once done)

.PHONY: test-unit
test-unit: install ## Unit tests (no cluster)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: install ## Integration tests against the local control plane
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

.PHONY: test-e2e
test-e2e: install ## End-to-end tests on the local cluster's real node
	$(BIN)/pytest tests/e2e $(PYTEST_ARGS)

.PHONY: differential
differential: install ## The policy engine against the real bash and dash, on many generated commands, and how many a second (root; EXAMPLES=2000)
	@n=$(or $(EXAMPLES),2000); start=$$(date +%s); \
	PADDOCK_DIFFERENTIAL_EXAMPLES=$$n $(BIN)/pytest -q -p no:cacheprovider \
		tests/unit/test_policy_differential.py -k generated && \
	echo "$$n generated commands checked in $$(( $$(date +%s) - start )) s"

.PHONY: bench
bench: install ## Benchmarks against the local control plane, printed as ratios to a baseline
	$(BIN)/python bench/bench_runs.py
	$(BIN)/python bench/bench_following.py --runs $(or $(QUIET_RUNS),40)
	$(BIN)/python bench/bench_sandboxes.py --sandboxes $(or $(SANDBOXES),200)
	$(BIN)/python bench/bench_snapshots.py
	$(BIN)/python bench/bench_pools.py --runs $(or $(POOL_RUNS),100) --rate $(or $(POOL_RATE),50)
	$(BIN)/python bench/bench_gateway.py
	$(BIN)/python bench/bench_model_route.py

##@ Run

.PHONY: run
run: install ## Run the operator against the cluster of the current kubeconfig
	$(BIN)/paddock operator

.PHONY: dev
dev: install ## The main job: a local cluster (if none answers), the CRDs, the operator, the examples
	$(BIN)/paddock dev

##@ Packaging

.PHONY: images
images: install ## Build the chart's images without Docker, import them into the local cluster's real node, print HELM_VALUES=<values file>
	$(BIN)/paddock cluster images

.PHONY: docker-build
docker-build: ## Build the operator image (needs a Docker engine; CI elsewhere publishes it)
	@command -v docker >/dev/null || { echo "docker-build: no docker here; see README, 'The operator image'"; exit 1; }
	docker build -t $(IMAGE) .

.PHONY: helm-lint
helm-lint: ## Lint the Helm chart, and render it with defaults and with every toggle on
	@helm=$$(hack/helm.sh | sed -n 's/^HELM=//p'); \
	$$helm lint --strict charts/paddock && \
	$$helm lint --strict charts/paddock --values charts/paddock/ci/all-toggles-values.yaml

##@ Help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} \
	  /^##@/ {printf "\n\033[1m%s\033[0m\n", substr($$0, 5)} \
	  /^[a-zA-Z0-9_-]+:.*##/ {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)
