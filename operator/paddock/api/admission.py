"""Admission policies (ValidatingAdmissionPolicy, CEL) that decide with the requesting user's own
permissions, which the operator cannot know once an object exists: every object a Workspace,
Sandbox or AgentRun refers to must be one the requester may ``get``, and an approval annotation
comes from someone who may ``patch`` the run, never with the run's creation.

Without them the operator would read for a user what the user may not read: a run's secret
env printed reversed, a ConfigMap taken as a prompt, a VolumeSnapshot restored. Generated with
the CRDs (``paddock crds``) into ``crds/`` and the chart. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paddock import GROUP, VERSION
from paddock.api.approvals import APPROVAL_ANNOTATION

Obj = dict[str, Any]


@dataclass(frozen=True)
class Reference:
    """A list of names, in the object's namespace, of one kind the requester must be able to
    ``get``: ``names`` is a CEL expression of the object giving a list of strings."""

    what: str  # as a person says it: "Secret"
    group: str
    resource: str
    names: str


def _optional(path: str, leaf: str) -> str:
    """``[<path>.<leaf>]`` where every part of the path is set, else ``[]``."""
    parts = path.split(".")
    checks = [f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts))]
    return f"({' && '.join(checks)} ? [{path}.{leaf}] : [])"


def _listed(path: str, item: str) -> str:
    """``<path>.map(x, x.<item>)`` where the list is set (items whose ``item`` is unset are
    left out), else ``[]``."""
    parts = path.split(".")
    checks = [f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts))]
    first = item.split(".")[0]
    return f"({' && '.join(checks)} ? {path}.filter(x, has(x.{first})).map(x, x.{item}) : [])"


def _sandbox_refs(spec: str) -> list[Reference]:
    """What a Sandbox spec (a Sandbox's own, or an AgentRun's template) names."""
    return [
        Reference("Workspace", GROUP, "workspaces", _optional(f"{spec}.workspaceRef", "name")),
        Reference(
            "SandboxPolicy", GROUP, "sandboxpolicies", _optional(f"{spec}.policyRef", "name")
        ),
        Reference(
            "VolumeSnapshot",
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            _optional(f"{spec}.restoreFrom", "volumeSnapshotName"),
        ),
        Reference("Sandbox", GROUP, "sandboxes", _optional(f"{spec}.restoreFrom", "sandboxName")),
    ]


REFERENCES: dict[str, list[Reference]] = {
    "workspaces": [
        Reference(
            "Secret",
            "",
            "secrets",
            " + ".join(
                [
                    _listed("object.spec.secrets", "secretKeyRef.name"),
                    _optional("object.spec.source.git.secretRef", "name"),
                    _listed("object.spec.skills", "git")
                    + ".filter(g, has(g.secretRef)).map(g, g.secretRef.name)",
                ]
            ),
        )
    ],
    "sandboxes": _sandbox_refs("object.spec"),
    "sandboxpools": _sandbox_refs("object.spec.template"),
    "agentruns": [
        Reference(
            "Secret",
            "",
            "secrets",
            _listed("object.spec.secrets", "secretKeyRef.name")
            + " + "
            + _optional("object.spec.promptFrom.secretKeyRef", "name")
            + " + "
            + _optional("object.spec.modelKey.secretKeyRef", "name")
            + " + "
            + _optional("object.spec.deliver.credentialsSecret", "name"),
        ),
        Reference(
            "ConfigMap",
            "",
            "configmaps",
            _optional("object.spec.promptFrom.configMapKeyRef", "name"),
        ),
        Reference("Sandbox", GROUP, "sandboxes", _optional("object.spec.sandboxRef", "name")),
        Reference("SandboxPool", GROUP, "sandboxpools", _optional("object.spec.poolRef", "name")),
        *_sandbox_refs("object.spec.sandboxTemplate"),
    ],
}


def _allowed(ref: Reference, name: str) -> str:
    return (
        f"authorizer.group('{ref.group}').resource('{ref.resource}')"
        f".namespace(request.namespace).name({name}).check('get').allowed()"
    )


def _anywhere(ref: Reference) -> str:
    """May the requester get every object of the kind in the namespace (one check; a request
    may make two, as each costs a fixed 350,000 of the 1,000,000 an expression may use)."""
    return (
        f"authorizer.group('{ref.group}').resource('{ref.resource}')"
        ".namespace(request.namespace).check('get').allowed()"
    )


def _reference_check(ref: Reference) -> Obj:
    # A message cannot ask the authorizer, so it names every reference of the kind.
    said = "an object may only refer to what its author may read"
    return {
        "expression": f"variables.specUnchanged || {_anywhere(ref)} || "
        f"({ref.names}).all(n, {_allowed(ref, 'n')})",
        "messageExpression": (
            f"'it refers to the {ref.what} ' + ({ref.names}).join(', ') + ' in namespace ' + "
            f"request.namespace + ', and you may not get it (or one of them): {said}'"
        ),
        "message": f"it refers to a {ref.what} you may not get: {said}",
        "reason": "Forbidden",
    }


_SPEC_UNCHANGED = {
    "name": "specUnchanged",
    "expression": "oldObject != null && has(oldObject.spec) && has(object.spec) && "
    "oldObject.spec == object.spec",
}
_SECRETS = Reference("Secret", "", "secrets", "[]")
# An MCP header's Secret, in a list of lists (the API server's CEL has no flatten).
_MCP_HEADER_SECRETS = {
    "expression": f"variables.specUnchanged || {_anywhere(_SECRETS)} || "
    "!has(object.spec.skills) || object.spec.skills"
    ".all(s, !has(s.mcp) || !has(s.mcp.headers) || s.mcp.headers.all(h, "
    f"!has(h.secretKeyRef) || {_allowed(_SECRETS, 'h.secretKeyRef.name')}))",
    "message": "an MCP header of a skill refers to a Secret you may not get: an object may "
    "only refer to what its author may read",
    "reason": "Forbidden",
}

# A credential route's header Secret: the gateway sends its value wherever the route goes.
_ROUTE_HEADER_SECRETS = {
    "expression": f"variables.specUnchanged || {_anywhere(_SECRETS)} || "
    "!has(object.spec.routes) || object.spec.routes"
    ".all(r, r.headers.all(h, "
    f"!has(h.secretKeyRef) || {_allowed(_SECRETS, 'h.secretKeyRef.name')}))",
    "message": "a header of a route refers to a Secret you may not get: an object may only "
    "refer to what its author may read",
    "reason": "Forbidden",
}

_APPROVALS = f"'{APPROVAL_ANNOTATION}'"
_APPROVAL_VARIABLES = [
    {
        "name": "approvals",
        "expression": "has(object.metadata.annotations) ? object.metadata.annotations"
        f".filter(k, k.startsWith({_APPROVALS})) : []",
    },
    {
        "name": "oldApprovals",
        "expression": "oldObject != null && has(oldObject.metadata.annotations) ? "
        f"oldObject.metadata.annotations.filter(k, k.startsWith({_APPROVALS})) : []",
    },
    {
        "name": "approvalsChanged",
        "expression": "size(variables.approvals) != size(variables.oldApprovals) || "
        "variables.approvals.exists(k, !(k in variables.oldApprovals) || "
        "oldObject.metadata.annotations[k] != object.metadata.annotations[k])",
    },
]
_APPROVAL_CHECKS = [
    {
        "expression": "request.operation != 'CREATE' || size(variables.approvals) == 0",
        "message": f"an AgentRun is created without {APPROVAL_ANNOTATION} annotations: a request "
        "is decided after it exists, by someone who may patch the run (paddock approve)",
        "reason": "Forbidden",
    },
    {
        "expression": "request.operation != 'UPDATE' || !variables.approvalsChanged || "
        f"authorizer.group('{GROUP}').resource('agentruns').namespace(request.namespace)"
        ".name(object.metadata.name).check('patch').allowed()",
        "message": f"deciding an approval ({APPROVAL_ANNOTATION} annotations) needs patch on "
        "the AgentRun",
        "reason": "Forbidden",
    },
]


def policy_name(resource: str) -> str:
    """Named as the kind's CRD is (config/default prefixes it, as it does every name)."""
    return f"{resource}.{GROUP}"


def render_policies() -> list[Obj]:
    """One ValidatingAdmissionPolicy and its binding per kind that refers to other objects."""
    objects: list[Obj] = []
    for resource, references in REFERENCES.items():
        name = policy_name(resource)
        spec: Obj = {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": [VERSION],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [resource],
                    }
                ]
            },
            # An update that leaves the spec as it was (a finalizer, an approval) refers to
            # nothing new: its references were checked when they were written.
            "variables": [_SPEC_UNCHANGED],
            "validations": [_reference_check(ref) for ref in references],
        }
        if resource == "workspaces":
            spec["validations"] += [_MCP_HEADER_SECRETS, _ROUTE_HEADER_SECRETS]
        if resource == "agentruns":
            spec["variables"] += _APPROVAL_VARIABLES
            spec["validations"] += _APPROVAL_CHECKS
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"]},
            }
        )
    return objects
