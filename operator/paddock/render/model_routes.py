"""The model routes the egress gateway serves: one Secret per run with a model key, in the
gateway's namespace, made by the operator at the run's launch and deleted at its end. It holds
the key, where to forward, the sandbox the requests must come from, when the route expires,
and the SHA-256 of the run's token (the token itself is only in the harness's environment).

This module is the one place the Secret's format is written and read: the operator renders it,
the gateway reads it from its watch."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from paddock.api.budget import Budget
from paddock.times import format_time, parse_time
from paddock.vocab.names import MANAGED_BY

Obj = dict[str, Any]
RUN_UID_LABEL = "paddock.dev/model-route-of"  # the run's uid: the gateway lists by this label
FIELDS = ("token-sha256", "key", "upstream", "provider", "run", "sandbox", "expires")


def route_name(run_uid: str) -> str:
    return f"paddock-model-{run_uid}"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Route:
    """A run's model route: requests with the token of digest ``token_sha256``, from a pod of
    ``sandbox`` (NAMESPACE/NAME), go to ``upstream`` with ``key``, until ``expires``."""

    token_sha256: str
    key: str
    upstream: str
    provider: str
    run: str
    sandbox: str
    expires: datetime
    harness: str = ""  # the run's harness, for the gateway's counts by harness
    uid: str = ""  # the run's uid (the Secret's label)
    budget: Budget | None = None  # the run's ceilings, fixed at its launch
    daily: Budget | None = None  # its namespace's day's, under its policy (for what it refuses)

    @property
    def ceilings(self) -> tuple[Budget | None, Budget | None]:
        return self.budget, self.daily


def route_secret(namespace: str, run_uid: str, route: Route) -> Obj:
    values = {
        "token-sha256": route.token_sha256,
        "key": route.key,
        "upstream": route.upstream,
        "provider": route.provider,
        "run": route.run,
        "sandbox": route.sandbox,
        "expires": format_time(route.expires),
        "harness": route.harness,
    }
    for name, ceilings in (("budget", route.budget), ("daily", route.daily)):
        if ceilings is not None:
            values[name] = json.dumps(ceilings.to_api(), sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": route_name(run_uid),
            "namespace": namespace,
            "labels": {**MANAGED_BY, RUN_UID_LABEL: run_uid},
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


def read_route(secret: Obj) -> Route | None:
    """The route a Secret holds; None when it is not a whole one."""
    data = secret.get("data") or {}
    try:
        values = {k: base64.b64decode(data[k], validate=True).decode() for k in FIELDS}
        harness = base64.b64decode(data.get("harness") or "", validate=True).decode()
        budget, daily = (_ceilings(data.get(name)) for name in ("budget", "daily"))
        expires = parse_time(values["expires"])
    except (KeyError, TypeError, ValueError, binascii.Error, ValidationError):
        return None
    if expires is None:
        return None
    return Route(
        token_sha256=values["token-sha256"],
        key=values["key"],
        upstream=values["upstream"],
        provider=values["provider"],
        run=values["run"],
        sandbox=values["sandbox"],
        expires=expires,
        harness=harness,
        uid=str(((secret.get("metadata") or {}).get("labels") or {}).get(RUN_UID_LABEL, "")),
        budget=budget,
        daily=daily,
    )


def _ceilings(encoded: str | None) -> Budget | None:
    text = base64.b64decode(encoded or "", validate=True).decode()
    return Budget.model_validate(json.loads(text)) if text else None
