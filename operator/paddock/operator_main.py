"""Running the kopf operator: logging, the handler registry, peering and the liveness probe."""

from __future__ import annotations

import kopf

PEERING_NAME = "paddock"


def run_operator(
    *,
    namespaces: list[str],
    liveness: str,
    priority: int | None,
    log_format: str,
    verbose: bool,
) -> int:
    kopf.configure(
        verbose=verbose,
        log_format=kopf.LogFormat.JSON if log_format == "json" else kopf.LogFormat.FULL,
    )
    import paddock.handlers  # noqa: F401  (registers the handlers)

    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=liveness or None,
        standalone=priority is None,
        priority=priority,
        peering_name=PEERING_NAME if priority is not None else None,
    )
    return 0
