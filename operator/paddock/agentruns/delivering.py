"""Delivering a finished run's work (``spec.deliver``): a new branch on the Workspace's forge
and a pull request, pushed by the operator with a token the sandbox never sees.

Why the operator and not the sandbox's sidecar: a pod that holds the token would need the
forge in its network fence (opened to the agent's container too) and would run git on a
repository the agent writes (its config names programs git runs). The operator instead takes
a git bundle out of the sandbox (the exec API, as the sandbox's user), reads it into a bare
repository of its own, checks it against the forge's base branch there, and pushes from there:
the sandbox hands over objects, nothing else, and every check is made on the operator's side."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddock.agentruns import inputs
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.delivery import Deliver, DeliverWhen, Delivery
from paddock.api.policy import SandboxPolicySpec
from paddock.api.reasons import RunReason as R
from paddock.forge import pulls, repos
from paddock.forge.errors import DeliveryError
from paddock.forge.git import Workbench
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.kube.errors import KubeError
from paddock.render import delivery as script
from paddock.runs import events as ev
from paddock.runs.events import Draft
from paddock.vocab.names import SANDBOX_CONTAINER

log = logging.getLogger("paddock.runs")

MAX_BUNDLE_BYTES = 256 * 1024 * 1024
BUNDLE_TIMEOUT = 600.0
HEADER_BYTES = 64 * 1024  # a bundle's header: its refs and the commits it starts from

Obj = dict[str, Any]


@dataclass
class Outcome:
    """What a delivery did: the Delivered condition, its event and where it went."""

    delivered: bool
    reason: R
    message: str
    delivery: Delivery | None = None
    drafts: list[Draft] = field(default_factory=list)


class _NothingError(Exception):
    """The run left no commit and no change."""


class _Capped:
    """The bundle's bytes into a file, up to MAX_BUNDLE_BYTES."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("wb")
        self.size = 0

    def write(self, data: bytes, /) -> int:
        self.size += len(data)
        if self.size > MAX_BUNDLE_BYTES:
            raise DeliveryError(f"the run's work is over {MAX_BUNDLE_BYTES >> 20} MiB as a bundle")
        return self._file.write(data)

    def close(self) -> None:
        self._file.close()


def deliver(run: Obj, spec: AgentRunSpec, sandbox: ReadySandbox, phase: RunPhase) -> Outcome:
    """Deliver the run's work as ``spec.deliver`` says; the outcome, never an exception."""
    assert spec.deliver is not None
    meta = run["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    if spec.deliver.only_if == DeliverWhen.SUCCEEDED and phase != RunPhase.SUCCEEDED:
        said = f"The run ended {phase}; deliver.onlyIf is succeeded, so nothing was pushed."
        return Outcome(False, R.NOT_DELIVERED, said)
    try:
        delivery = _deliver(run, spec.deliver, spec, sandbox)
    except _NothingError:
        said = "The run left no commit and no change: nothing was pushed."
        return Outcome(False, R.NOTHING_TO_DELIVER, said)
    except DeliveryError as exc:
        return _undelivered(namespace, name, exc)
    except (KubeError, OSError) as exc:  # the API, or this machine: said, never raised
        return _undelivered(namespace, name, DeliveryError(str(exc), refused=False))
    where = delivery.pull_request_url or f"branch {delivery.branch}"
    said = f"The run's work was delivered: {where} (commit {delivery.commit[:12]})"
    log.info("run %s/%s: %s", namespace, name, said)
    data = delivery.to_api()
    return Outcome(True, R.DELIVERED, said, delivery, [Draft(ev.RUN_DELIVERED, said, data)])


def _undelivered(namespace: str, name: str, exc: DeliveryError) -> Outcome:
    reason = R.DELIVERY_REFUSED if exc.refused else R.DELIVERY_FAILED
    said = f"The run's work was not delivered: {exc.message}"
    log.warning("run %s/%s: %s", namespace, name, said)
    data = {"reason": str(reason), "message": exc.message}
    return Outcome(False, reason, said, drafts=[Draft(ev.RUN_UNDELIVERED, said, data)])


def _deliver(run: Obj, deliver: Deliver, spec: AgentRunSpec, sandbox: ReadySandbox) -> Delivery:
    meta = run["metadata"]
    namespace = meta["namespace"]
    source = inputs.workspace_of(namespace, sandbox).source
    if source is None or source.git is None:
        raise DeliveryError(f"Workspace {sandbox.workspace} has no git source")
    repo = repos.repository(source.git.url, deliver.forge)
    token = _token(namespace, deliver)
    branch = _branch(run, deliver, spec)
    with Workbench(repo, token) as bench:
        base = (deliver.pull_request and deliver.pull_request.base) or source.git.ref
        base = base or bench.default_branch()
        if branch == base:
            raise DeliveryError(f"the branch to push, {branch}, is the base branch")
        bundle = _take_bundle(namespace, sandbox, script.commit_message(spec, meta["name"]),
                              bench.path / "work.bundle")  # fmt: skip
        with bundle.open("rb") as header:  # its first lines, not the whole bundle
            needed = repos.prerequisites(header.read(HEADER_BYTES))
        bench.fetch_base(base, needed)
        if not bench.descends_from_base(needed):
            raise DeliveryError(f"the sandbox's work does not start from {base}")
        commit = bench.read_bundle(bundle, script.DELIVER_REF)
        if bench.new_commits() == 0:
            raise _NothingError
        changed = sorted(set(bench.changed_paths()) | set(bench.differing_paths()))
        _check_workflows(changed, bench, namespace, sandbox)
        commit = _push(bench, branch, commit)
        opened = None
        if deliver.pull_request is not None:
            asked = pulls.Asked(branch, base, *_title_and_body(deliver, spec, meta["name"]),
                                draft=deliver.pull_request.draft)  # fmt: skip
            opened = pulls.open_pull_request(repo, token, asked)
    return Delivery(
        branch=branch, commit=commit, base=base,
        pull_request_url=opened and opened.url, pull_request_number=opened and opened.number,
    )  # fmt: skip


def _branch(run: Obj, deliver: Deliver, spec: AgentRunSpec) -> str:
    meta = run["metadata"]
    return repos.branch_name(deliver.branch, meta["name"], spec.thread_id, meta["uid"])


def _token(namespace: str, deliver: Deliver) -> str:
    pair = deliver.credentials_secret.pair
    token = kube.secret_values(namespace, [pair]).get(pair, "").strip()
    if not token:
        raise DeliveryError(f"Secret {pair[0]} has no key {pair[1]} (deliver.credentialsSecret)")
    return token


def referenced_by_ci(bench: Workbench) -> set[str] | None:
    """The places the work's CI definitions name to run (local actions, GitLab's local
    includes), and those the named places name in turn, each read where the commit's links
    lead; None when there are too many to read (every changed path then counts as a CI
    definition's)."""
    links = bench.links()
    found: set[str] = set()
    while True:
        places = repos.ci_places(links, found)
        texts = None if places is None else bench.texts(places)
        named = None if texts is None else repos.referenced_places(texts)
        if named is None or len(found | named) > repos.MAX_REFERENCES:
            return None
        if named <= found:
            return found
        found |= named


def _take_bundle(namespace: str, sandbox: ReadySandbox, message: str, path: Path) -> Path:
    """Commit the uncommitted work in the sandbox, then stream its bundle into ``path``."""
    try:
        made = kube_exec.run(namespace, sandbox.pod, SANDBOX_CONTAINER, script.snapshot_argv(),
                             stdin=script.snapshot_payload(message))  # fmt: skip
        commit = script.parse_snapshot(made.stdout) if made.exit_code == 0 else None
        if commit is None:
            said = made.stderr.strip()[-300:] or f"exit code {made.exit_code}"
            raise DeliveryError(f"committing the sandbox's changes failed: {said}", False)
        sink = _Capped(path)
        try:
            argv = script.bundle_argv(commit)
            out = kube_exec.stream_out(namespace, sandbox.pod, SANDBOX_CONTAINER, argv, sink,
                                       BUNDLE_TIMEOUT)  # fmt: skip
        finally:
            sink.close()
    except (KubeError, TimeoutError) as exc:
        raise DeliveryError(f"the sandbox could not be reached: {exc}", refused=False) from None
    if out.exit_code == script.NOTHING:
        raise _NothingError
    if out.exit_code != 0:
        said = out.stderr.strip()[-300:] or f"exit code {out.exit_code}"
        raise DeliveryError(f"the sandbox's git bundle failed: {said}", refused=False)
    return path


def _check_workflows(
    paths: list[str], bench: Workbench, namespace: str, sandbox: ReadySandbox
) -> None:
    referenced = referenced_by_ci(bench)
    changed = (
        paths if referenced is None else repos.workflow_changes(paths, bench.links(), referenced)
    )
    if not changed:
        return
    policy = inputs.command_policy(namespace, sandbox)
    if isinstance(policy, SandboxPolicySpec) and policy.deliver.allow_workflow_changes:
        return
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    raise DeliveryError(
        f"the work changes CI definitions ({shown}), which the sandbox's policy does not "
        "allow (SandboxPolicy spec.deliver.allowWorkflowChanges)"
    )


def _push(bench: Workbench, branch: str, commit: str) -> str:
    """Create the branch; a branch already holding this work (a delivery tried again) is
    kept as it is. Anything else there is refused: never a force-push."""
    existing = bench.remote_branches(branch).get(branch)
    if existing is None:
        bench.push(branch)
        return commit
    if existing == commit or bench.same_work(commit, existing):
        return existing
    raise DeliveryError(f"branch {branch} already exists on the forge and holds other work")


def _title_and_body(deliver: Deliver, spec: AgentRunSpec, run: str) -> tuple[str, str]:
    asked = deliver.pull_request
    assert asked is not None
    message = script.commit_message(spec, run)
    title = asked.title or message.splitlines()[0]
    body = asked.body or f"The work of Paddock AgentRun {run} ({spec.harness})."
    return title, body
