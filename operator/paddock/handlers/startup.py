"""Operator start-up: the kopf settings that matter, set in one place."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf
import prometheus_client

from paddock import GROUP
from paddock.handlers import pool, sandbox, snapshots
from paddock.handlers.agentrun import RunThreads
from paddock.handlers.coalescing import ReconcileQueue
from paddock.handlers.diffbase import CompactDiffBaseStorage
from paddock.handlers.network import API_NAMESPACE
from paddock.handlers.references import References
from paddock.kube import client as kube
from paddock.render import model_usage
from paddock.render.cluster_addresses import API_SERVICE_LABEL
from paddock.sandboxes import service
from paddock.settings import OperatorSettings
from paddock.vocab import names
from paddock.vocab.names import MANAGED_BY, SANDBOX_LABEL, WORKSPACE_LABEL

FINALIZER = f"{GROUP}/finalizer"
POOL_WORKERS = 4  # pools reconciled at once: each is quick but for its creates (``pool_writes``)
STARTING_RUNS = 3  # threads starting runs, per ``worker_limit`` (``RunThreads``)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod, the service account; elsewhere, the current kubeconfig context."""
    in_pod: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
    if in_pod is not None:
        return dataclasses.replace(in_pod, server=in_cluster_server(os.environ, in_pod.server))
    info: kopf.ConnectionInfo | None = kopf.login_with_kubeconfig(**kwargs)
    return info


def in_cluster_server(env: Mapping[str, str], default: str) -> str:
    """The API server as the kubelet tells every pod, in KUBERNETES_SERVICE_HOST/PORT, as
    client-go's in-cluster config reads it; kopf's own default is a DNS name, which fails
    where no cluster DNS runs."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return default
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def _queues(memo: kopf.Memo, config: OperatorSettings) -> None:
    """The reconcile queues (one reconcile of a key at a time in each) and their threads.

    - Sandboxes: ``worker_limit`` threads, each mid-request at most once.
    - Pools: a few threads. A refill's creates go to ``pool_writes`` (``worker_limit``
      threads every pool shares), so a refill makes as many members at once as the Sandbox
      reconcile works on, and all pools together no more.
    - Workspaces' snapshots: one thread (rare, and each takes its time in the object store).
    - Runs: their own threads (``RunThreads``), three times ``worker_limit`` starting, as many
      as it running; a run takes a pool's member there, never behind a refill."""
    workers = config.tuning.worker_limit
    memo.reconciles = ReconcileQueue[tuple[str, str]](
        lambda named, attempt: sandbox.reconcile_named(*named, config, attempt),
        delay=config.tuning.coalesce_seconds,
        workers=workers,
    )
    memo.pool_writes = ThreadPoolExecutor(workers, "paddock-pool-write")
    memo.pools = ReconcileQueue[tuple[str, str]](
        lambda named, attempt: pool.reconcile_pool_named(
            *named, memo.pool_writes, workers, attempt
        ),
        delay=config.tuning.coalesce_seconds,
        workers=POOL_WORKERS,
    )
    memo.workspace_snapshots = ReconcileQueue[tuple[str, str]](
        lambda named, attempt: snapshots.workspace_snapshots_named(*named, config, attempt),
        delay=config.tuning.coalesce_seconds,
        workers=1,
    )
    memo.run_threads = RunThreads(starting=STARTING_RUNS * workers, running=workers)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = OperatorSettings.from_env()
    memo.config = config
    memo.references = References()  # filled by the Sandbox event handler
    _queues(memo, config)
    service.forget_watched()  # filled again by the event handlers from their watches
    queues = {"Sandbox": memo.reconciles, "Workspace": memo.workspace_snapshots}
    service.configure_archives(config, lambda kind, *named: queues[kind].ask(named))
    # A connection for each thread that may be mid-request: ``worker_limit`` of each kind, three
    # times that starting runs (``_bound_concurrency``), the pools' and snapshots' few, the
    # transfers and to_thread's.
    connections = (4 + STARTING_RUNS) * config.tuning.worker_limit + 28
    kube.tune(connections, config.tuning.request_timeout_seconds)
    kube.load_config()
    memo.metrics_server = None
    if config.metrics_port:
        memo.metrics_server, _thread = prometheus_client.start_http_server(config.metrics_port)

    # Progress and diff-base live in annotations under our own prefix, never kopf's default.
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = CompactDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )

    # Watches end server-side and reconnect well before a load balancer cuts them silently;
    # the client timeout is the backstop for a connection that hangs without closing.
    settings.watching.server_timeout = config.tuning.watch_server_timeout_seconds
    settings.watching.client_timeout = config.tuning.watch_server_timeout_seconds + 30
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = config.tuning.request_timeout_seconds
    settings.networking.connect_timeout = 10

    # Server-side filters: the operator hears only of the objects its handlers are for, not of
    # every pod, ConfigMap or EndpointSlice of the cluster.
    for resource in ("pods", "persistentvolumeclaims"):
        settings.watching.label_selectors[resource] = SANDBOX_LABEL
    settings.watching.label_selectors["configmaps"] = names.FILES_LABEL  # Workspaces' files
    # The fences: the baseline, the shared ones and a sandbox's own are all Paddock's.
    settings.watching.label_selectors["networkpolicies"] = ",".join(
        f"{key}={value}" for key, value in MANAGED_BY.items()
    )
    settings.watching.label_selectors[snapshots.SNAPSHOT_GROUP, "volumesnapshots"] = WORKSPACE_LABEL
    settings.watching.label_selectors["discovery.k8s.io", "endpointslices"] = (
        f"{API_SERVICE_LABEL}=kubernetes"
    )
    settings.watching.field_selectors["discovery.k8s.io", "endpointslices"] = (
        f"metadata.namespace={API_NAMESPACE}"
    )
    settings.watching.field_selectors["v1", "events"] = model_usage.FIELD_SELECTOR

    _bound_concurrency(settings, config)

    # kopf posts handler log records of this level and above as Kubernetes Events; Paddock posts
    # the events a person needs itself, so only warnings and errors go through kopf.
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = "paddock-operator"


def _bound_concurrency(settings: kopf.OperatorSettings, config: OperatorSettings) -> None:
    """Where concurrency is bounded, and why.

    kopf's per-object workers are asyncio tasks (a task and a queue each, gone 5 s after the
    object's last event): not bounded. Bounded, a burst of new objects would get a worker only
    as others idled out (worker_limit / 5 s a second, whatever the API server could take), and
    the watch of their kind would stall meanwhile. What costs is bounded: threads, and through
    them the API connections (``kube.client.POOL_SIZE``), so requests in flight never outgrow
    what the API server's priority and fairness hands out. The threads of the handlers that
    wait on the API (the event handlers that only file work are coroutines, on the event
    loop), the Sandbox reconciles', a pool's creates, the running runs' steps: ``worker_limit``
    each; the starting runs' steps, three times that (``_queues``)."""
    settings.queueing.worker_limit = None
    settings.execution.max_workers = config.tuning.worker_limit


@kopf.on.cleanup()
def stop(memo: kopf.Memo, **_: Any) -> None:
    service.stop_archives()
    for queue in ("reconciles", "pools", "workspace_snapshots", "run_threads"):
        reconciles = memo.get(queue)
        if reconciles is not None:
            reconciles.stop()
    writers = memo.get("pool_writes")
    if writers is not None:
        writers.shutdown(wait=False, cancel_futures=True)
    server = memo.get("metrics_server")
    if server is not None:
        server.shutdown()
        server.server_close()
