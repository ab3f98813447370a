"""SandboxPolicy: what an agent may do (commands, capabilities, network egress)."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from paddock.api.budget import DailyUsage, PolicyBudget
from paddock.api.common import (
    MAX_LIST,
    ApiModel,
    Conditions,
    KindInfo,
    PrinterColumn,
    Resource,
    cel,
    validations,
)

Glob = Annotated[str, Field(min_length=1, max_length=1024)]


class Decision(StrEnum):
    """What happens to an action: run it, ask a person first, or refuse it."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class CommandRules(ApiModel):
    """Shell command rules, checked by the operator before it runs setup steps and command
    runs, and for each shell command of a claude-code, codex, opencode or gemini agent. Rules
    are globs over one simple command with quotes removed: anchored, * matches any text,
    nothing else is special; a rule may also name a Workspace script. Precedence: deny > ask >
    allow > default.

    Every simple command is checked wherever it sits (lists, pipelines, subshells,
    substitutions, here-documents, eval and bash -c text, the command that env, timeout,
    xargs or sudo runs) and the verdict is the strictest of its parts; a command that cannot
    be parsed, or whose name is only known at run time, is denied. ask makes an agent's
    command, and a command run's command, wait for a person's approval (paddock approve); a
    setup step that needs one waits until the policy or the step changes.
    """

    allow: list[Glob] = Field(
        default_factory=list,
        max_length=256,
        description="Globs of commands that run freely (they must match whatever the "
        "command's $-expansions turn out to be).",
    )
    ask: list[Glob] = Field(
        default_factory=list,
        max_length=256,
        description="Globs of commands that need a person's approval: such an agent's "
        "command, or a command run's command, waits for paddock approve or deny (or the "
        "approval.paddock.dev/<id> annotation); such a setup step keeps the Sandbox Pending "
        "(ApprovalRequired) until the policy or the step changes.",
    )
    deny: list[Glob] = Field(
        default_factory=list,
        max_length=256,
        description="Globs of commands that never run (matched also by the command's bare "
        "name, and by any value its $-expansions could take).",
    )
    default: Decision = Field(
        default=Decision.ASK, description="Decision for a command that matches no rule."
    )


class Capabilities(ApiModel):
    """Coarse capabilities of the agent beyond shell commands."""

    file_write: Decision = Field(
        default=Decision.ALLOW,
        description="Writing files: a redirection that writes one (>, >>, &>, <>) in a "
        "checked command is judged by this. Commands that write files themselves (cp, tee) "
        "are judged by the command rules.",
    )
    network: Decision = Field(
        default=Decision.ALLOW,
        description="Network access of the sandbox pod, as its NetworkPolicy: allow gives "
        "egress to any address but cluster-internal ranges, the metadata address and the "
        "cluster's nodes and API server; ask and deny give none beyond network.egress and DNS. "
        "Enforced only where the cluster's network plugin enforces NetworkPolicies. A checked "
        "command's bash connection (a redirection to /dev/tcp/HOST/PORT) is judged by it too.",
    )


class Protocol(StrEnum):
    TCP = "TCP"
    UDP = "UDP"
    SCTP = "SCTP"


class EgressPort(ApiModel):
    """A destination port."""

    port: int = Field(ge=1, le=65535, description="Port number.")
    protocol: Protocol = Field(default=Protocol.TCP, description="TCP, UDP or SCTP.")


CIDR_MESSAGE = (
    "must be a network in CIDR notation with no host bits set, e.g. 10.1.0.0/16 (not 10.1.2.3/16)"
)


def _network(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError(CIDR_MESSAGE) from None
    if "/" not in value:
        raise ValueError(CIDR_MESSAGE)
    return value


Cidr = Annotated[
    str,
    AfterValidator(_network),
    Field(
        max_length=64,
        json_schema_extra=validations(
            cel("isCIDR(self) && cidr(self) == cidr(self).masked()", CIDR_MESSAGE)
        ),
    ),
]


class EgressRule(ApiModel):
    """Destinations the sandbox pod may reach."""

    cidrs: list[Cidr] = Field(
        min_length=1, max_length=MAX_LIST, description="Destination ranges, e.g. 10.1.0.0/16."
    )
    ports: list[EgressPort] = Field(
        default_factory=list, max_length=MAX_LIST, description="Ports; empty means every port."
    )


# A host name, or "*." and a domain, and an optional port. The last label starts with a letter,
# which no IP address's does: a rule names hosts, never addresses.
_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_PORT = r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
HOST_PATTERN = rf"^(\*\.)?({_LABEL}\.)*[a-z]([-a-z0-9]{{0,61}}[a-z0-9])?(:{_PORT})?$"
HOST_MESSAGE = (
    "must be a lower-case host name, or *. and a domain (subdomains only), with an optional "
    ":port, e.g. github.com, *.npmjs.org or pypi.org:443; never an IP address"
)


def _host_pattern(value: str) -> str:
    if not re.fullmatch(HOST_PATTERN, value):
        raise ValueError(HOST_MESSAGE)
    return value


HostPattern = Annotated[
    str,
    AfterValidator(_host_pattern),
    Field(
        max_length=260,
        json_schema_extra=validations(cel(f"self.matches(r'{HOST_PATTERN}')", HOST_MESSAGE)),
    ),
]


class HostDecision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class HostRules(ApiModel):
    """Egress by host name, through the egress gateway: the sandbox pod reaches the internet
    only through the gateway (its NetworkPolicy allows nothing else there), and the gateway
    lets an HTTP request or an HTTPS tunnel through by these rules. A pattern without a port
    matches ports 443 and 80. Precedence: deny > ask > allow > default. A host to ask about is
    refused until a person approves it on the run in the sandbox (an approval of kind network):
    approve lets that host and port through for the rest of the run, approve-always every host
    the asking rule matches. The gateway resolves the name
    itself and refuses internal addresses whatever the name, an address instead of a name, and
    a TLS tunnel whose server name (SNI) is not the host asked for.

    Applies where capabilities.network is allow and the operator runs with an egress gateway;
    without one the Sandbox's EgressGateway condition says so and its egress is as without
    hosts."""

    allow: list[HostPattern] = Field(
        default_factory=list, max_length=MAX_LIST, description="Hosts the sandbox may reach."
    )
    ask: list[HostPattern] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Hosts a person approves first, on the run (whatever allow says).",
    )
    deny: list[HostPattern] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Hosts the sandbox never reaches, whatever allow and ask say.",
    )
    default: HostDecision = Field(
        default=HostDecision.DENY,
        description="Decision for a host that matches no rule: allow, ask or deny.",
    )


class NetworkRules(ApiModel):
    """Egress of the sandbox pod, enforced as a Kubernetes NetworkPolicy.

    The baseline comes from capabilities.network: allow reaches any public address but not
    cluster-internal ranges, the cloud metadata address or the cluster's nodes and API server;
    ask and deny give no egress. The rules here add destinations to either baseline.
    """

    dns: bool = Field(
        default=True,
        description="Allow DNS lookups (UDP and TCP port 53) to the cluster's DNS pods and the "
        "resolvers the operator is configured with, and nowhere else.",
    )
    egress: list[EgressRule] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Destinations allowed on top of the baseline, e.g. an in-cluster mirror.",
    )
    hosts: HostRules | None = Field(
        default=None,
        description="Egress by host name through the egress gateway, instead of to any public "
        "address (with capabilities.network allow). Unset: no gateway in the way.",
    )


class DeliverRules(ApiModel):
    """What a run's delivery (AgentRun spec.deliver) may push."""

    allow_workflow_changes: bool = Field(
        default=False,
        description="Whether a delivered branch may change a CI definition (GitHub, Gitea, "
        "Forgejo and GitLab's, Woodpecker, Drone, CircleCI, Azure Pipelines, Buildkite, "
        "Jenkins, Travis, Bitbucket and others: docs/delivery.md lists them), a directory "
        "above one, or where the branch's symbolic links make one read from. Default: such "
        "a delivery is refused.",
    )


class KeyInSandbox(StrEnum):
    """Whether a run's model API key may be in its sandbox."""

    ALLOW = "allow"
    REFUSE = "refuse"


class ModelKeyRules(ApiModel):
    """Where runs' model API keys may be."""

    in_sandbox: KeyInSandbox = Field(
        default=KeyInSandbox.ALLOW,
        description="refuse: a run whose model key would be in the sandbox (a modelKey no "
        "egress gateway holds, or a secret under a name an agent CLI reads its key from, "
        "such as ANTHROPIC_API_KEY, of the run or its Workspace) fails KeyInSandboxRefused "
        "before it starts. The operator's setting (the chart's policy.modelKeyInSandbox) "
        "refuses it for every sandbox, whatever this says.",
    )


class SecretsInSandbox(StrEnum):
    """Whether secret values may be in a sandbox's environment."""

    ALLOW = "allow"
    REFUSE = "refuse"


class SecretRules(ApiModel):
    """Where the secrets runs use may be."""

    in_sandbox: SecretsInSandbox = Field(
        default=SecretsInSandbox.ALLOW,
        description="refuse: no secret value goes into a sandbox's environment. A Sandbox whose "
        "Workspace puts one there (its secrets, an MCP server's secret header) is not started "
        "(SecretsInSandboxRefused), and a run that would put one there (its secrets, a "
        "modelKey no egress gateway holds, or its sandbox's pod started with one) fails "
        "SecretsInSandboxRefused before it starts. Held by the gateway instead: an HTTP API's "
        "secret header as a Workspace route (spec.routes), the model key as the run's modelKey. "
        "A git clone token is used by setup only, never in the sandbox's environment.",
    )


class SandboxPolicySpec(ApiModel):
    """What may run in a sandbox. The operator checks setup steps and command runs against
    the command rules and fileWrite before they run, and every agent harness's shell commands
    (claude-code, codex, opencode, gemini) through a gate in the sandbox; it renders network
    as the pod's NetworkPolicy."""

    commands: CommandRules = Field(
        default_factory=CommandRules, description="Shell command allow/ask/deny rules."
    )
    capabilities: Capabilities = Field(
        default_factory=Capabilities, description="File-write and network capabilities."
    )
    network: NetworkRules = Field(
        default_factory=NetworkRules, description="Pod egress, as a NetworkPolicy."
    )
    budget: PolicyBudget | None = Field(
        default=None,
        description="What each run under the policy may spend on its model (a ceiling on the "
        "run's own budget), and what its runs in one namespace may spend a day. Counted at "
        "the egress gateway's model route: a run under a policy with a budget must reach its "
        "model there (modelKey, and a gateway), or it fails BudgetUnenforceable.",
    )
    deliver: DeliverRules = Field(
        default_factory=DeliverRules, description="What runs' deliveries may push."
    )
    model_key: ModelKeyRules = Field(
        default_factory=ModelKeyRules, description="Where runs' model API keys may be."
    )
    secrets: SecretRules = Field(
        default_factory=SecretRules, description="Where the secrets runs use may be."
    )


class SandboxPolicyStatus(ApiModel):
    """Observed state of a SandboxPolicy."""

    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation this status describes."
    )
    conditions: Conditions
    daily_usage: list[DailyUsage] | None = Field(
        default=None,
        max_length=4096,
        description="With budget.perNamespaceDaily: what the runs under the policy spent "
        "today, by namespace (kept by the operator; deleting a run takes nothing off).",
    )


class SandboxPolicy(Resource):
    """What an agent may do: command rules, capabilities and network egress."""

    kind_info = KindInfo(
        kind="SandboxPolicy",
        plural="sandboxpolicies",
        short_name="sbxpol",
        columns=(
            PrinterColumn("Default", ".spec.commands.default", "Decision for unlisted commands"),
            PrinterColumn("Network", ".spec.capabilities.network", "Network capability"),
        ),
    )

    api_version: Literal["paddock.dev/v1alpha1"] = "paddock.dev/v1alpha1"
    kind: Literal["SandboxPolicy"] = "SandboxPolicy"
    spec: SandboxPolicySpec = Field(default_factory=SandboxPolicySpec)
    status: SandboxPolicyStatus | None = None
