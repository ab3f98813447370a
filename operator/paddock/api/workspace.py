"""Workspace: what goes into a sandbox (source, setup, scripts, env, instructions, skills)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    field_validator,
)

from paddock.api.common import (
    MAX_LIST,
    ApiModel,
    Conditions,
    ContainerEnvVar,
    ContainerSecretEnvVar,
    KindInfo,
    PrinterColumn,
    Resource,
    SecretKeySelector,
    SecretRef,
    cel,
    validations,
)
from paddock.api.fields import (
    Duration,
    GitRef,
    UrlWithoutCredentials,
    clone_url,
    clone_url_rule,
)
from paddock.api.skills import McpHeader, Plugin, Skill

# --- source ------------------------------------------------------------------------------------

DEPTH_MESSAGE = 'depth must be a whole number of commits of at least 1, or "full"'


def _check_depth(value: Any) -> int | str:
    if value == "full" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value  # type: ignore[no-any-return]
    raise ValueError(DEPTH_MESSAGE)


CloneDepth = Annotated[
    int | str,
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": [
                cel("type(self) == int ? self >= 1 : self == 'full'", DEPTH_MESSAGE)
            ],
        }
    ),
]


class GitSource(ApiModel):
    """A git repository cloned into /workspace before setup runs."""

    model_config = ConfigDict(json_schema_extra=validations(clone_url_rule("url")))

    url: UrlWithoutCredentials = Field(
        description="Repository URL: https://, http://, git://, file:// or a path (not ssh). "
        "Never carries credentials: a token comes from secretRef."
    )
    ref: GitRef | None = Field(
        default=None,
        description="Branch or tag to check out. Empty means the repository's default branch.",
    )
    depth: CloneDepth = Field(
        default=1,
        description="History to fetch: a number of commits (default 1, a shallow single-branch "
        'clone) or "full" for the whole history.',
    )
    secret_ref: SecretKeySelector | None = Field(
        default=None,
        description="Secret key holding an access token for a private repository. It reaches "
        "git through a credential helper, never through the URL, argv or a log.",
    )

    _depth = field_validator("depth")(_check_depth)

    _url = field_validator("url")(clone_url)


class WorkspaceSource(ApiModel):
    """Where the workspace's files come from."""

    git: GitSource | None = Field(default=None, description="Clone a git repository.")


# --- setup -------------------------------------------------------------------------------------


class SetupCommand(ApiModel):
    """A serial setup step with options. A plain string is the same step with defaults."""

    run: str = Field(min_length=1, max_length=16384, description="Shell command to run.")
    timeout: Duration | None = Field(
        default=None, description="Longest the step may take; overrides setupStepTimeout."
    )


class ParallelGroup(ApiModel):
    """Commands started together from the shell's current directory and environment.

    The next serial step starts once every command of the group has finished; one failing
    command fails setup.
    """

    parallel: list[Annotated[str, Field(min_length=1, max_length=16384)]] = Field(
        min_length=1, max_length=MAX_LIST, description="Commands to run concurrently."
    )
    timeout: Duration | None = Field(
        default=None, description="Longest the group may take; overrides setupStepTimeout."
    )


SETUP_STEP_MESSAGE = (
    "a setup step is a command string, {run: <command>, timeout: <duration>} or "
    "{parallel: [<command>, ...]}"
)


def _setup_step_shape(value: Any) -> str | None:
    if isinstance(value, str):
        return "String"
    if isinstance(value, dict) and ("run" in value) != ("parallel" in value):
        return "Command" if "run" in value else "Parallel"
    if isinstance(value, SetupCommand | ParallelGroup):
        return type(value).__name__.removeprefix("Setup").replace("Group", "")
    return None


# Structural schemas give each node one type, and a step is a string OR an object, so the
# node keeps unknown fields. The API server cannot run CEL on such an untyped node ("unable to
# convert structural schema to CEL declarations"), so the shape is checked by the model, and
# the operator reports a bad step as a condition and an Event on the Workspace.
SetupStep = Annotated[
    Annotated[str, Field(min_length=1, max_length=16384), Tag("String")]
    | Annotated[SetupCommand, Tag("Command")]
    | Annotated[ParallelGroup, Tag("Parallel")],
    Discriminator(
        _setup_step_shape,
        custom_error_type="setup_step",
        custom_error_message=SETUP_STEP_MESSAGE,
    ),
    WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True}),
]


# --- credential routes -------------------------------------------------------------------------

ROUTE_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$"
# A URL path's characters, and at most 8 wildcards (* or **).
_PATH_CHARS = "[-A-Za-z0-9._~!$&'()+,;=:@%/]*"
ROUTE_PATH_PATTERN = rf"^/(?:{_PATH_CHARS}(?:\*\*?)?){{0,8}}{_PATH_CHARS}$"
HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


class RouteRule(ApiModel):
    """Requests a credential route lets through: one of these methods, to a path matching one
    of these patterns (under the route's URL)."""

    methods: list[HttpMethod] = Field(min_length=1, max_length=6, description="HTTP methods.")
    paths: list[Annotated[str, Field(max_length=1024, pattern=ROUTE_PATH_PATTERN)]] = Field(
        min_length=1,
        max_length=8,
        description="Path patterns under the route's URL, each starting with / and holding "
        "a URL path's characters and at most 8 wildcards: * matches within one segment, ** "
        "any number of segments (/repos/** matches /repos/a/b).",
    )


class HttpRoute(ApiModel):
    """An HTTP API a run reaches with a secret it never holds: through the egress gateway,
    which adds the headers (their values from Secrets) to the requests its rules let through.
    The run gets the route's URL in PADDOCK_ROUTE_<NAME> (upper case, - as _), a URL of the
    gateway with a token of the run's that works only from its sandbox's pod and dies with
    the run. Without a gateway the route is not there (the run's CredentialRoutes condition
    says so): its secrets never go into the sandbox."""

    name: str = Field(
        max_length=32,
        pattern=ROUTE_NAME_PATTERN,
        description="Name of the route: lower case letters, digits and -, starting with a "
        "letter. Its URL is in the run's PADDOCK_ROUTE_<NAME>.",
    )
    url: UrlWithoutCredentials = Field(
        pattern=r"^https?://[^/?#]+(/[^?#]*)?$",
        description="Where the route goes (http:// or https://, a path and no query): a "
        "request to the route's URL + /PATH goes to this URL + /PATH. Its host must be one the "
        "sandbox's SandboxPolicy allows (network.hosts), as for any request.",
    )
    headers: list[McpHeader] = Field(
        min_length=1,
        max_length=16,
        description="Headers the gateway adds to each request (any the request carries of the "
        "same name, and its Authorization, Cookie and Proxy-Authorization, are dropped).",
    )
    allow: list[RouteRule] = Field(
        min_length=1,
        max_length=8,
        description="What passes; anything else is refused, and nothing of it is forwarded. "
        "The rules judge the method and the path; the query goes as it is.",
    )


class WorkspaceSpec(ApiModel):
    """What goes into a sandbox of this workspace."""

    source: WorkspaceSource | None = Field(
        default=None, description="Where the files come from; none gives an empty workspace."
    )
    image: str | None = Field(
        default=None,
        max_length=1024,
        description="Container image of sandboxes of this workspace; setup runs in it. "
        "Defaults to the operator's sandbox image.",
    )
    setup: list[SetupStep] = Field(
        default_factory=list,
        max_length=256,
        description="Ordered setup steps, run once per prepared workspace. A string runs in one "
        "persistent shell, so cd and export carry over; {parallel: [...]} runs commands "
        "concurrently and waits for all of them.",
    )
    setup_step_timeout: Duration = Field(
        default="30m", description="Longest one setup step may take unless it sets its own."
    )
    scripts: dict[str, Annotated[str, Field(max_length=16384)]] = Field(
        default_factory=dict,
        description="Named commands (name -> command), listed in AGENTS.md and usable as "
        "policy aliases.",
    )
    env: list[ContainerEnvVar] = Field(
        default_factory=list,
        max_length=256,
        description="Environment of the sandbox container (setup steps and runs start with it). "
        "Credentials go under secrets; variables that run code on start (BASH_ENV, PATH, "
        "LD_*, ...) are refused: export them in a setup step, which the policy judges.",
    )
    secrets: list[ContainerSecretEnvVar] = Field(
        default_factory=list,
        max_length=256,
        description="Environment variables taken from Secrets, injected as env only.",
    )
    instructions: str | None = Field(
        default=None,
        max_length=262144,
        description="Written as AGENTS.md at the workspace root; CLAUDE.md and GEMINI.md "
        "link to it.",
    )
    skills: list[Skill] = Field(
        default_factory=list, max_length=MAX_LIST, description="Skills and MCP servers."
    )
    routes: list[HttpRoute] = Field(
        default_factory=list,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        description="HTTP APIs runs reach through the egress gateway, which holds their "
        "secret headers: the sandbox never holds them.",
    )
    plugins: list[Plugin] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Claude Code plugins. Not loaded yet: their list is written to the "
        "workspace's .paddock/harness/claude-settings.json (enabledPlugins), which no run reads; "
        "a Workspace with plugins says so in a warning condition.",
    )

    def secret_refs(self) -> list[SecretRef]:
        """Every (Secret, key) the workspace refers to: its env, the clone token, git skill
        tokens and MCP header values."""
        refs = [s.secret_key_ref.pair for s in self.secrets]
        if self.source and self.source.git and self.source.git.secret_ref:
            refs.append(self.source.git.secret_ref.pair)
        for skill in self.skills:
            if skill.git and skill.git.secret_ref:
                refs.append(skill.git.secret_ref.pair)
        return refs + self.mcp_refs() + self.route_refs()

    def mcp_refs(self) -> list[SecretRef]:
        """The (Secret, key) pairs of the MCP servers' secret headers."""
        return [
            h.secret_key_ref.pair
            for skill in self.skills
            if skill.mcp
            for h in skill.mcp.headers
            if h.secret_key_ref
        ]

    def route_refs(self) -> list[SecretRef]:
        """The (Secret, key) pairs of the routes' headers: the gateway's, never the sandbox's."""
        return [h.secret_key_ref.pair for r in self.routes for h in r.headers if h.secret_key_ref]

    @field_validator("routes")
    @classmethod
    def _unique_route_names(cls, routes: list[HttpRoute]) -> list[HttpRoute]:
        names = [route.name for route in routes]
        if len(set(names)) != len(names):
            raise ValueError("each route needs a name of its own")
        return routes

    @field_validator("skills")
    @classmethod
    def _skills_apart(cls, skills: list[Skill]) -> list[Skill]:
        """Skills whose variables (an MCP server's URL and headers, a git skill's token:
        PADDOCK_<PARTS>, each run of other characters one _) would be the same: one would
        take the other's value, a secret sent to another server."""
        given = [skill.name for skill in skills]
        if len(set(given)) != len(given):
            raise ValueError("each skill needs a name of its own")
        seen: dict[str, str] = {}
        for skill in skills:
            names: list[tuple[str, ...]] = [(f"skill {skill.name}", "MCPURL", skill.name)]
            names.append((f"skill {skill.name}", "SKILL", skill.name, "TOKEN"))
            for header in skill.mcp.headers if skill.mcp else []:
                names.append(
                    (f"header {header.name} of skill {skill.name}", "MCP", skill.name, header.name)
                )
            for what, *parts in names:
                variable = "_".join(re.sub(r"[^A-Za-z0-9]+", "_", p).upper() for p in parts)
                if seen.setdefault(variable, what) != what:
                    raise ValueError(
                        f"the {seen[variable]} and the {what} would share the variable "
                        f"PADDOCK_{variable}: give them names apart"
                    )
        return skills


class WorkspaceSnapshot(ApiModel):
    """A snapshot taken of a prepared workspace: a VolumeSnapshot, or an archive of the
    volume's files in the object store."""

    name: str = Field(description="Name of the VolumeSnapshot, or of the archive.")
    workspace_hash: str = Field(description="Workspace hash the snapshot was taken at.")
    created_at: datetime | None = Field(default=None, description="When it was taken.")
    ready: bool = Field(default=False, description="Whether it can be restored from.")
    location: str | None = Field(
        default=None, description="For an archive: its s3:// URL in the operator's bucket."
    )


class WorkspaceStatus(ApiModel):
    """Observed state of a Workspace."""

    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation this status describes."
    )
    hash: str | None = Field(
        default=None,
        description="Content hash of everything that changes the prepared result (image "
        "included, secret values excluded).",
    )
    snapshots: list[WorkspaceSnapshot] = Field(
        default_factory=list, description="Snapshots of prepared sandboxes of this workspace."
    )
    conditions: Conditions


class Workspace(Resource):
    """What goes into a sandbox: source, setup, scripts, env, instructions and skills."""

    kind_info = KindInfo(
        kind="Workspace",
        plural="workspaces",
        short_name="ws",
        max_name_length=63,
        name_becomes="a label value on its snapshots",
        columns=(
            PrinterColumn("Source", ".spec.source.git.url", "Git repository cloned into it"),
            PrinterColumn("Hash", ".status.hash", "Workspace hash", priority=1),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', "Ready"),
        ),
    )

    api_version: Literal["paddock.dev/v1alpha1"] = "paddock.dev/v1alpha1"
    kind: Literal["Workspace"] = "Workspace"
    spec: WorkspaceSpec
    status: WorkspaceStatus | None = None
