"""What the gateway knows of the cluster, and what it decides from it: which sandbox a
connection comes from (by its pod's address, from the watch of pods) and whether that
sandbox's policy lets it reach a host. The data and the decision are pure; ``follow`` fills
them from watches.

A host the policy asks about is let through once a person approved it on the run in the
sandbox (from the watch of AgentRuns: its ``status.approvals`` of kind network); until then it
is refused, and the decision names the run to ask on (``Decided.ask``).

A sandbox is known by its pod's address, which it cannot forge for another sandbox: its pod
runs without NET_RAW, so it cannot send from another address, and a TCP connection needs the
answers to reach the address it claims. A pod counts only while the Sandbox named by its
label is its controller (the UIDs agree), so no other pod can pass for a sandbox.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.budgets import Spent
from paddock.policy.choice import INLINE
from paddock.policy.hosts import approved, judge_host, normal_host
from paddock.vocab import names
from paddock.vocab.ownership import controller_uid

Obj = dict[str, Any]
Key = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class Ask:
    """A host to ask a person about, on the run in the sandbox."""

    namespace: str
    run: str
    uid: str
    target: str  # HOST:PORT


@dataclass(frozen=True)
class Decided:
    allowed: bool
    sandbox: str  # NAMESPACE/NAME, or "-" for an address that is no sandbox's
    reason: str
    rule: str | None = None
    # What decided, for the metrics' bounded labels: a host rule, "default" (a name no rule
    # matched), "any" (a policy that names no hosts), or "refused" (anything else).
    counted_as: str = "refused"
    ask: Ask | None = None  # refused until a person approves it on this run


@dataclass(frozen=True)
class _Run:
    """A run in a sandbox, as the gateway needs it: its approved hosts."""

    sandbox: Key
    uid: str
    approved: list[tuple[str, list[str], bool]]  # (HOST:PORT, rules, always)
    usage: Spent = field(default_factory=Spent)  # its status's count (every replica's)


ACTIVE_PHASES = frozenset({"Running", "AwaitingApproval"})


@dataclass(frozen=True)
class _Sandbox:
    uid: str
    policy: str | None  # status.policy: NAME, NAMESPACE/NAME, "inline", or None (none applies)
    inline: Parsed | None


Parsed = SandboxPolicySpec | str  # a policy's spec, or why it cannot be read


def _parse(spec: Obj) -> Parsed:
    try:
        return SandboxPolicySpec.model_validate(spec)
    except ValidationError:
        return "its policy is invalid"


class Directory:
    """Sandbox pods by address, Sandboxes and SandboxPolicies, as the watches last said."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, tuple[Key, str]] = {}  # address -> (sandbox, controller uid)
        self._addresses: dict[Key, set[str]] = {}  # pod -> its addresses
        self._sandboxes: dict[Key, _Sandbox] = {}
        self._policies: dict[Key, Parsed] = {}
        self._runs: dict[Key, _Run] = {}  # runs active in a sandbox
        self._running: dict[Key, Key] = {}  # sandbox -> its active run
        self._by_uid: dict[str, Key] = {}  # an active run's uid -> the run

    def pod(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        sandbox = (meta.get("labels") or {}).get(names.SANDBOX_LABEL)
        status = obj.get("status") or {}
        running = status.get("phase") in ("Pending", "Running")
        addresses = {p["ip"] for p in status.get("podIPs") or [] if p.get("ip")}
        owner = controller_uid(obj)
        with self._lock:
            for address in self._addresses.pop(key, set()):
                self._pods.pop(address, None)
            if event == "DELETED" or not running or not sandbox or owner is None:
                return
            self._addresses[key] = addresses
            for address in addresses:
                self._pods[address] = ((meta["namespace"], sandbox), owner)

    def sandbox(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        with self._lock:
            if event == "DELETED":
                self._sandboxes.pop(key, None)
                return
            policy = (obj.get("status") or {}).get("policy")
            inline = (obj.get("spec") or {}).get("policy")
            parsed = _parse(inline) if inline is not None else None
            self._sandboxes[key] = _Sandbox(meta["uid"], policy, parsed)

    def policy(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        with self._lock:
            if event == "DELETED":
                self._policies.pop(key, None)
            else:
                self._policies[key] = _parse(obj.get("spec") or {})

    def run(self, event: str, obj: Obj) -> None:
        meta, status = obj["metadata"], obj.get("status") or {}
        key = (meta["namespace"], meta["name"])
        sandbox = status.get("sandboxName")
        with self._lock:
            gone = self._runs.pop(key, None)
            if gone is not None and self._running.get(gone.sandbox) == key:
                del self._running[gone.sandbox]
            if gone is not None:
                self._by_uid.pop(gone.uid, None)
            if event == "DELETED" or not sandbox or status.get("phase") not in ACTIVE_PHASES:
                return
            approved = [
                (str(a.get("target")), list(a.get("rules") or []), bool(a.get("always")))
                for a in status.get("approvals") or []
                if a.get("kind") == "network" and a.get("state") == "Approved"
            ]
            run = _Run((meta["namespace"], sandbox), meta["uid"], approved, _usage(status))
            self._runs[key] = run
            self._running[run.sandbox] = key
            self._by_uid[run.uid] = key

    def usage_of(self, uid: str) -> Spent:
        """What the run's status says the model route counted for it, at every replica: the
        operator's sum of their usage Events (nothing while the run is not active)."""
        with self._lock:
            key = self._by_uid.get(uid)
            run = self._runs.get(key) if key is not None else None
            return run.usage if run is not None else Spent()

    def changed(self, kind: str, event: str, obj: Obj) -> None:
        handlers = {"Pod": self.pod, "Sandbox": self.sandbox, "SandboxPolicy": self.policy,
                    "AgentRun": self.run}  # fmt: skip
        handlers[kind](event, obj)

    def relisted(self, kind: str, items: list[Obj]) -> None:
        """A new listing of ``kind``: what it no longer holds is forgotten."""
        with self._lock:
            if kind == "Pod":
                self._pods.clear()
                self._addresses.clear()
            elif kind == "Sandbox":
                self._sandboxes.clear()
            elif kind == "AgentRun":
                self._runs.clear()
                self._running.clear()
                self._by_uid.clear()
            else:
                self._policies.clear()
        for item in items:
            self.changed(kind, "ADDED", item)

    def sandbox_at(self, address: str) -> str | None:
        """The sandbox (NAMESPACE/NAME) whose pod has the address, if the pod counts."""
        with self._lock:
            found = self._pods.get(address)
            if found is None:
                return None
            key, owner = found
            sandbox = self._sandboxes.get(key)
            return "/".join(key) if sandbox is not None and sandbox.uid == owner else None

    def decide(self, address: str, host: str, port: int) -> Decided:
        with self._lock:
            found = self._pods.get(address)
            if found is None:
                return Decided(False, "-", "the address is no sandbox pod's")
            key, owner = found
            sandbox = self._sandboxes.get(key)
            label = "/".join(key)
            if sandbox is None or sandbox.uid != owner:
                return Decided(False, label, "the pod's Sandbox is not known")
            spec = self._spec(key[0], sandbox)
            run_key = self._running.get(key)
            run = None if run_key is None else (run_key, self._runs[run_key])
        return _judged(label, spec, host, port, run)

    def _spec(self, namespace: str, sandbox: _Sandbox) -> Parsed | None:
        """The policy's spec; None where none applies; a reason where it is not known."""
        if sandbox.policy is None:
            return None
        if sandbox.policy == INLINE:
            return sandbox.inline if sandbox.inline is not None else "its inline policy is gone"
        policy_namespace, _, name = sandbox.policy.rpartition("/")
        found = self._policies.get((policy_namespace or namespace, name))
        return found if found is not None else f"its SandboxPolicy {sandbox.policy} is not known"


def _judged(
    label: str, policy: Parsed | None, host: str, port: int, run: tuple[Key, _Run] | None
) -> Decided:
    if isinstance(policy, str):
        return Decided(False, label, policy)
    if normal_host(host) is None:
        return Decided(False, label, "not a host name (an address, or no name at all)")
    if policy is None:
        return Decided(True, label, "no policy applies to the sandbox", counted_as="any")
    if policy.capabilities.network != Decision.ALLOW:
        return Decided(False, label, f"capabilities.network is {policy.capabilities.network}")
    if policy.network.hosts is None:
        reason = "the policy names no hosts (any public address)"
        return Decided(True, label, reason, counted_as="any")
    verdict = judge_host(policy.network.hosts, host, port)
    counted = verdict.rule or "default"
    if verdict.decision != Decision.ASK:
        return Decided(verdict.allowed, label, verdict.reason, verdict.rule, counted)
    target = f"{normal_host(host)}:{port}"
    if run is None:
        reason = f"{verdict.reason}, and no run is running in the sandbox to ask on"
        return Decided(False, label, reason, verdict.rule, counted)
    (namespace, name), found = run
    if approved(verdict, target, found.approved):
        reason = f"{verdict.reason}, and approved on run {name}"
        return Decided(True, label, reason, verdict.rule, counted)
    ask = Ask(namespace, name, found.uid, target)
    reason = f"{verdict.reason}: waiting for approval on run {name}"
    return Decided(False, label, reason, verdict.rule, counted, ask)


def _usage(status: Obj) -> Spent:
    usage = status.get("usage") or {}
    if usage.get("source") != "gateway":
        return Spent()
    return Spent(
        input_tokens=_count(usage.get("inputTokens")),
        output_tokens=_count(usage.get("outputTokens")),
        cost_usd=float(usage.get("costUsd") or 0.0),
        model_requests=_count(usage.get("modelRequests")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def sni_matches(host: str, sni: str) -> bool:
    """Whether a tunnel's TLS server name is the host its CONNECT asked for."""
    asked, named = normal_host(host), normal_host(sni)
    return asked is not None and asked == named
