"""The cluster's own addresses (its nodes', the API server's): kept from their watches, and a
change reaches every sandbox, whose NetworkPolicy leaves them out under ``network: allow``."""

from __future__ import annotations

from typing import Any

import kopf

from paddock.render.cluster_addresses import API_SERVICE_LABEL
from paddock.sandboxes import service

API_NAMESPACE = "default"  # where the API server publishes the Service kubernetes


def _of_api_server(namespace: str | None, **_: Any) -> bool:
    return namespace == API_NAMESPACE


@kopf.on.event("nodes")
@kopf.on.event(
    "discovery.k8s.io",
    "v1",
    "endpointslices",
    labels={API_SERVICE_LABEL: "kubernetes"},
    when=_of_api_server,
)
async def cluster_address_seen(
    type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    if service.cluster_address_seen(type, dict(body)):
        for named in memo.references.all():
            memo.reconciles.ask(named)
