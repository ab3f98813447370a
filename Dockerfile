# The Paddock operator image: `paddock operator` as a non-root user on a slim Python base.
# Build: docker build -t ghcr.io/OWNER/paddock:0.1.0 .   (see README, "The operator image")
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Stage 1: the wheel of this project and the wheels of its dependencies.
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN python -m build --wheel --outdir /wheels . \
    && pip wheel --no-cache-dir --wheel-dir /wheels /wheels/paddock-*.whl

# Stage 2: only the installed wheels; no compilers, no build tools, no source tree.
FROM ${PYTHON_IMAGE}
ARG PADDOCK_VERSION=0.1.0
# git: a run's delivery (AgentRun spec.deliver) is checked and pushed by the operator's own git.
# (The base image's Debian release pins the versions.)
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin paddock
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-cache-dir --no-index --find-links /tmp/wheels "paddock==${PADDOCK_VERSION}" \
    && rm -rf /tmp/wheels
USER 65532:65532
# 8080: liveness (/healthz); 8081: Prometheus metrics (/metrics).
EXPOSE 8080 8081
ENTRYPOINT ["paddock", "operator"]
