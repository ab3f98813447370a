"""Which SandboxPolicy a sandbox runs under: the one it names, its inline policy, the
operator's default, or none. Pure; the services read the policy it points at."""

from __future__ import annotations

from dataclasses import dataclass

from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxSpec

INLINE = "inline"


@dataclass(frozen=True)
class PolicyChoice:
    """``inline``: the policy itself; ``namespace``/``name``: a SandboxPolicy to read;
    neither: no policy. ``label`` is what the Sandbox's status.policy says."""

    inline: SandboxPolicySpec | None = None
    namespace: str | None = None
    name: str | None = None
    field: str = ""  # where the choice came from, for messages

    @property
    def label(self) -> str | None:
        if self.inline is not None:
            return INLINE
        return self.name if self.namespace is None else f"{self.namespace}/{self.name}"


def choose_policy(spec: SandboxSpec, namespace: str, default: str | None) -> PolicyChoice:
    """``default`` is the operator's policy.default: NAME or NAMESPACE/NAME."""
    if spec.policy_ref is not None:
        return PolicyChoice(name=spec.policy_ref.name, field="spec.policyRef.name")
    if spec.policy is not None:
        return PolicyChoice(inline=spec.policy, field="spec.policy")
    if default:
        other, _, name = default.rpartition("/")
        field = "the operator's policy.default"
        return PolicyChoice(
            namespace=other if other and other != namespace else None, name=name, field=field
        )
    return PolicyChoice()


def from_label(label: str | None, inline: SandboxPolicySpec | None) -> PolicyChoice:
    """The choice a Sandbox's status.policy records (what a run of it is checked against)."""
    if label == INLINE:
        return PolicyChoice(inline=inline or SandboxPolicySpec(), field="spec.policy")
    if not label:
        return PolicyChoice()
    other, _, name = label.rpartition("/")
    return PolicyChoice(namespace=other or None, name=name, field="the Sandbox's status.policy")
