"""Skills and plugins of a Workspace: what each harness is given besides the repository."""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator, model_validator

from paddock.api.common import (
    MAX_LIST,
    ApiModel,
    SecretKeySelector,
    cel,
    validations,
)
from paddock.api.fields import (
    GitRef,
    UrlWithoutCredentials,
    WorkspacePath,
    clone_url,
    clone_url_rule,
)


class AgentSkill(ApiModel):
    """A skill written from this spec: SKILL.md with its description and instructions."""

    description: str = Field(
        min_length=1, max_length=1024, description="When the agent should use the skill."
    )
    instructions: str = Field(min_length=1, max_length=262144, description="The body of SKILL.md.")


class GitSkill(ApiModel):
    """A skill fetched from a git repository (depth 1)."""

    model_config = ConfigDict(json_schema_extra=validations(clone_url_rule("repo")))

    repo: UrlWithoutCredentials = Field(
        description="Repository URL of the skill: https://, http://, git://, file:// or a path "
        "(not ssh). Never carries credentials: a token comes from secretRef."
    )
    ref: GitRef | None = Field(default=None, description="Branch or tag; default branch.")
    into: WorkspacePath | None = Field(
        default=None,
        description="Workspace-relative directory to clone into (replaced by the clone); "
        "default .paddock/skills/<name>.",
    )
    secret_ref: SecretKeySelector | None = Field(
        default=None, description="Secret key holding an access token for a private repository."
    )

    _repo = field_validator("repo")(clone_url)


HEADER_SOURCE_MESSAGE = "a header has either a value or a secretKeyRef, not both"


class McpHeader(ApiModel):
    """One HTTP header sent to an MCP server; its value is literal or from a Secret."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel("has(self.value) != has(self.secretKeyRef)", HEADER_SOURCE_MESSAGE)
        )
    )

    name: str = Field(min_length=1, max_length=256, description="Header name.")
    value: str | None = Field(default=None, max_length=8192, description="Literal value.")
    secret_key_ref: SecretKeySelector | None = Field(
        default=None, description="Secret key holding the value, for credentials."
    )
    bearer: bool = Field(
        default=False, description='Send the value as "Bearer <value>" (for Authorization).'
    )

    @model_validator(mode="after")
    def _one_source(self) -> McpHeader:
        if (self.value is None) == (self.secret_key_ref is None):
            raise ValueError(HEADER_SOURCE_MESSAGE)
        return self


class McpSkill(ApiModel):
    """A remote MCP server (streamable HTTP), projected into each harness's MCP config."""

    url: UrlWithoutCredentials = Field(
        pattern=r"^https?://",
        description="URL of the MCP server (http:// or https://). Never carries credentials: "
        "send them as a header from a Secret.",
    )
    headers: list[McpHeader] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Headers sent with every request. One from a Secret is held by the egress "
        "gateway where one serves credential routes (each run reaches the server through a "
        "route of its own, which adds it); without one, it is in the sandbox's environment.",
    )


class FileSkill(ApiModel):
    """A file written into the workspace."""

    path: WorkspacePath = Field(description="Workspace-relative path of the file.")
    content: str = Field(max_length=262144, description="Content of the file.")


SKILL_KINDS = ("agent", "git", "mcp", "file")
ONE_SKILL_KIND_MESSAGE = "a skill sets exactly one of agent, git, mcp or file"


class Skill(ApiModel):
    """A capability given to the agent; exactly one of agent, git, mcp or file."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "[has(self.agent), has(self.git), has(self.mcp), has(self.file)]"
                ".filter(x, x).size() == 1",
                ONE_SKILL_KIND_MESSAGE,
            )
        )
    )

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Name of the skill (lowercase letters, digits and '-'); used in paths.",
    )
    agent: AgentSkill | None = Field(default=None, description="A skill written from the spec.")
    git: GitSkill | None = Field(default=None, description="A skill cloned from git.")
    mcp: McpSkill | None = Field(default=None, description="A remote MCP server.")
    file: FileSkill | None = Field(default=None, description="A file in the workspace.")

    @model_validator(mode="after")
    def _one_kind(self) -> Skill:
        if sum(getattr(self, kind) is not None for kind in SKILL_KINDS) != 1:
            raise ValueError(ONE_SKILL_KIND_MESSAGE)
        return self


class Plugin(ApiModel):
    """A Claude Code plugin from a marketplace: listed, not yet loaded by any run."""

    name: str = Field(min_length=1, max_length=253, description="Plugin name.")
    marketplace: str | None = Field(
        default=None, max_length=2048, description="Marketplace the plugin comes from."
    )
