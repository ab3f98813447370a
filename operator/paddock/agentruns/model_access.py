"""A run's model key (``spec.modelKey``): held by the egress gateway's model route where the
operator is told of one, so that the sandbox never holds it. At launch the operator writes the
run's route (a Secret in the gateway's namespace: the key, where to forward, the sandbox the
requests must come from, the SHA-256 of a fresh token) and gives the harness the token and the
route's URL in place of the key and the provider's; at the run's end, and at its deletion, it
deletes the route. Without a gateway, the harness gets the key itself, and the run says so."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from paddock.agentruns import gateway_secrets
from paddock.agentruns.decide import Ending
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.budget import Budget
from paddock.api.fields import parse_duration
from paddock.api.reasons import RunReason as R
from paddock.harness import models
from paddock.render import model_routes
from paddock.render.model_routes import RUN_UID_LABEL, Route
from paddock.settings.groups import GatewaySettings

Obj = dict[str, Any]
# A route outlives the run's own deadline by this much at most (the operator deletes it at the
# run's end; the gateway refuses an expired one even if that delete never happened).
EXPIRY_MARGIN = timedelta(minutes=10)


@dataclass(frozen=True)
class ModelGateway:
    """The gateway's model route as sandboxes reach it, and the namespace of its routes."""

    url: str
    namespace: str


def model_gateway(gateway: GatewaySettings) -> ModelGateway | None:
    if not gateway.model_url or not gateway.namespace:
        return None
    return ModelGateway(gateway.model_url, gateway.namespace)


@dataclass(frozen=True)
class Access:
    """What the harness is given for its model: env (the token, or the key), the route's URL
    for a CLI that reads it from its config (Codex), and the run's ModelRoute condition
    (status, reason, message). (The key is scrubbed from the log as every Secret value the run
    names is; the token is not a secret outside the sandbox's pod, and dies with the run.)"""

    env: dict[str, str] = field(default_factory=dict)
    model_url: str | None = None
    condition: tuple[bool, R, str] | None = None


NONE = Access()


def grant(
    run: Obj,
    spec: AgentRunSpec,
    sandbox: ReadySandbox,
    gateway: ModelGateway | None,
    now: datetime,
    budget: Budget | None = None,
    daily: Budget | None = None,
    key: str = "",
) -> Access | Ending:
    """The harness's access to its model, whose ``key`` is the value of the run's modelKey:
    through the gateway's route (written now), else the key; the run's end when its harness's
    provider is not one Paddock knows how to point it at (an OpenCode model of another
    provider)."""
    if spec.model_key is None:
        return NONE
    provider = models.provider_of(spec)
    if not isinstance(provider, models.Provider):  # (a Provider is a str too)
        said = f"the run's modelKey cannot be given to its harness: {provider}"
        return Ending(RunPhase.FAILED, R.MODEL_UNROUTABLE, said)
    if gateway is None:
        said = "No egress gateway holds the model key: it is in the harness's environment."
        return Access({models.key_env(spec, provider): key}, None, (False, R.KEY_IN_SANDBOX, said))
    meta = run["metadata"]
    namespace, uid = str(meta["namespace"]), str(meta["uid"])
    token = "paddock-" + secrets.token_urlsafe(32)
    lifetime = parse_duration(spec.timeout) + EXPIRY_MARGIN
    route = Route(
        token_sha256=model_routes.token_digest(token),
        key=key,
        upstream=models.upstream(spec, provider),
        provider=str(provider),
        run=f"{namespace}/{meta['name']}",
        sandbox=f"{namespace}/{sandbox.name}",
        expires=now + lifetime,
        harness=str(spec.harness),
        uid=uid,
        budget=budget,
        daily=daily,
    )
    secret = model_routes.route_secret(gateway.namespace, uid, route)
    taken = gateway_secrets.write_own(secret, RUN_UID_LABEL, uid, "model route")
    if taken:
        return Ending(RunPhase.FAILED, R.MODEL_UNROUTABLE, taken)
    route_env = models.routed_env(spec, provider, models.ModelRoute(gateway.url, token))
    said = f"The egress gateway holds the model key; the harness reaches {route.upstream} there."
    return Access(route_env, gateway.url, (True, R.THROUGH_GATEWAY, said))


def revoke(run_uid: str, gateway: ModelGateway | None, held: bool = True) -> None:
    """Delete the run's route, if it has one (``held``: its spec names a model key), and only
    a Secret labelled as this run's."""
    if gateway is None or not held:
        return
    gateway_secrets.delete_own(
        gateway.namespace, model_routes.route_name(run_uid), RUN_UID_LABEL, run_uid
    )
