"""A run's approval requests for a caller: which pending ones a decision names, and the
decision, recorded as the annotation ``approval.paddock.dev/<id>`` on the AgentRun (``approve``,
``approve-always`` or ``deny``, then ``:`` and the digest of the request's text), which the
operator reads while the run waits: an approval allows only the text it names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paddock.api.approvals import (
    APPROVAL_ANNOTATION,
    DECIDED_BY_ANNOTATION,
    ApprovalChoice,
    ApprovalState,
    decision,
    digest_of,
    visible,
)
from paddock.client.access import AGENTRUNS, Caller, RefusedError
from paddock.client.common import Obj, get
from paddock.kube import client as kube


def decide(
    caller: Caller,
    namespace: str,
    run: str,
    ids: list[str],
    choice: ApprovalChoice,
    *,
    every: bool = False,
    shown: Mapping[str, str] | None = None,
) -> Obj:
    """Decide the requests ``ids`` (none: the only pending one; ``every``: all pending). Each
    decision names the digest of the request's whole text: ``shown`` (by id) is what the
    caller's face showed, refused unless it is the text the request holds; without it, the
    text read here, which the answer gives back as every face shows it. Who decided is
    recorded beside each decision where the caller's identity is known (a token's, over
    HTTP): informative, since anyone who may patch the run may write it."""
    caller.may("patch", AGENTRUNS, namespace, run)
    found = get("AgentRun", namespace, run)
    chosen = choose(found, ids, every=every)
    if isinstance(chosen, str):
        raise RefusedError(chosen)
    texts = {a["id"]: str(a.get("target") or "") for a in approvals_of(found) if a["id"] in chosen}
    digests = {rid: digest_of(text) for rid, text in texts.items()}
    if shown is not None and set(shown) != set(chosen):
        raise RefusedError(
            f"the texts shown ({', '.join(sorted(shown)) or 'none'}) are not the requests "
            f"decided ({', '.join(chosen)}); nothing was decided"
        )
    for rid, digest in (shown or {}).items():
        if digest != digests[rid]:
            raise RefusedError(
                f"request {rid} of {run} is not the text that was shown (it is {digests[rid]}); "
                "nothing was decided"
            )
    annotations = {f"{APPROVAL_ANNOTATION}{rid}": decision(choice, digests[rid]) for rid in chosen}
    if caller.username is not None:
        annotations |= {f"{DECIDED_BY_ANNOTATION}{rid}": caller.username for rid in chosen}
    kube.patch("AgentRun", namespace, run, {"metadata": {"annotations": annotations}})
    targets = {rid: visible(text) for rid, text in texts.items()}
    return {"run": run, "decided": chosen, "choice": str(choice), "targets": targets,
            "digests": digests}  # fmt: skip


def pending(
    caller: Caller, namespace: str, run: str, ids: list[str], *, every: bool = False
) -> dict[str, str]:
    """The whole text of each pending request a decision would name (as ``decide`` chooses
    them), by id: what a face shows before it decides."""
    caller.may("get", AGENTRUNS, namespace, run)
    found = get("AgentRun", namespace, run)
    chosen = choose(found, ids, every=every)
    if isinstance(chosen, str):
        raise RefusedError(chosen)
    return {a["id"]: str(a.get("target") or "") for a in approvals_of(found) if a["id"] in chosen}


def choose(run: dict[str, Any], ids: list[str], *, every: bool) -> list[str] | str:
    """The pending request ids to decide, or why there is none to."""
    pending = [a["id"] for a in approvals_of(run) if a.get("state") == ApprovalState.PENDING]
    name = run["metadata"]["name"]
    if ids:
        unknown = [i for i in ids if i not in pending]
        if unknown:
            listed = ", ".join(pending) or "none"
            return f"{name} has no pending request {', '.join(unknown)} (pending: {listed})"
        return ids
    if not pending:
        return f"{name} has no pending approval request"
    if every or len(pending) == 1:
        return pending
    return f"{name} has {len(pending)} pending requests ({', '.join(pending)}): name one, or --all"


def approvals_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("approvals") or [])
