"""What a run's start decides from, read once per step (``gather``): the Secrets it names and
its sandbox gets, each read once; its prompt's ConfigMap; its sandbox, judged (found, made
from its template, taken from a pool: the one part that may write, since a claim is a
read-and-write the API server arbitrates); and, once the sandbox is Ready, its Workspace,
policy and pod as the operator's watches show them, and the runs queued before it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from paddock.agentruns import inputs
from paddock.agentruns.sandbox import ReadySandbox
from paddock.agentruns.start import StartWorld, exposures, missing_prompt
from paddock.api.agentrun import AgentRunSpec
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.vocab import secret_data

Obj = dict[str, Any]


def gather(run: Obj, spec: AgentRunSpec, launched: Callable[[ReadySandbox], bool]) -> StartWorld:
    """The run's world for this step. ``launched``: whether its harness was launched in the
    Ready sandbox before (an exec, asked only of a run whose status holds a launch's digest)."""
    namespace = run["metadata"]["namespace"]
    secrets = kube.read_secrets(namespace, (name for name, _ in spec.secret_refs()))
    ref = spec.prompt_from.config_map_key_ref if spec.prompt_from else None
    configmap = kube.get("ConfigMap", namespace, ref.name) if ref is not None else None
    world = StartWorld(namespace, secrets, configmap)
    if secret_data.missing_keys(secrets, spec.secret_refs()) or missing_prompt(world, spec):
        return world  # (the sandbox is not looked for until they are there)
    verdict = inputs.find_sandbox(run, spec)
    world = replace(world, verdict=verdict)
    if not isinstance(verdict.state, ReadySandbox):
        return world
    return _of_sandbox(run, spec, world, verdict.state, launched)


def _of_sandbox(
    run: Obj,
    spec: AgentRunSpec,
    world: StartWorld,
    ready: ReadySandbox,
    launched: Callable[[ReadySandbox], bool],
) -> StartWorld:
    namespace = world.namespace
    found_policy = inputs.policy_object(namespace, ready)  # read once: parsed, and kept
    world = replace(
        world,
        workspace=inputs.workspace_of(namespace, ready),
        policy=inputs.parsed_policy(ready, found_policy),
        policy_object=found_policy,
        pod=CACHE.get("Pod", namespace, ready.pod),
        queued=inputs.queued(run, spec, ready),
    )
    # The Secrets its sandbox gets, read too (each once): for the values scrubbed from its
    # events, and to find its model key where it may not be.
    names = [name for name, _ in world.workspace.secret_refs()]
    if spec.model_key is not None:
        names += [e.ref[0] for e in exposures(world, spec, ready.workspace)]
    more = [name for name in dict.fromkeys(names) if name not in world.secrets]
    secrets = {**world.secrets, **kube.read_secrets(namespace, more)}
    return replace(world, secrets=secrets, launched=launched(ready))
