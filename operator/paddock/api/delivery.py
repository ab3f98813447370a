"""An AgentRun's delivery: its work pushed to a new branch of the Workspace's repository, and a
pull request opened, by the operator (spec.deliver); where it went (status.delivery)."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import ConfigDict, Field, model_validator

from paddock.api.common import ApiModel, SecretKeySelector, cel, validations
from paddock.api.fields import GitRef


class Forge(StrEnum):
    """The kind of git forge a delivery opens its pull request on."""

    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"


class DeliverWhen(StrEnum):
    SUCCEEDED = "succeeded"
    ALWAYS = "always"


BRANCH_TEMPLATE_MESSAGE = (
    "branch is a new git branch's name that may hold {run}, {thread} and {id}: letters, "
    "digits and ._/- only; not HEAD, not starting with refs/, - or /; no part starting with . "
    "or ending with .lock; no .. and no //; not ending with / or ."
)


class PullRequest(ApiModel):
    """The pull request (merge request on GitLab) a delivery opens."""

    title: str | None = Field(
        default=None,
        max_length=256,
        description="Its title. Default: the first line of the commit message.",
    )
    body: str | None = Field(
        default=None,
        max_length=65536,
        description="Its description. Default: a line naming the run it comes from.",
    )
    base: GitRef | None = Field(
        default=None,
        description="The branch it asks to merge into. Default: the Workspace source's ref, "
        "else the repository's default branch.",
    )
    draft: bool = Field(default=False, description="Open it as a draft.")


class Deliver(ApiModel):
    """Push the run's work to a new branch of the Workspace's git repository and open a pull
    request. The operator does it, with a token the sandbox never sees: the sandbox hands over
    a git bundle of its commits and uncommitted changes, and the operator checks and pushes
    it (never a force-push, never to the base branch, never a workflow change unless the
    policy allows it)."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "self.branch.matches('^[A-Za-z0-9_{}][A-Za-z0-9._/{}-]*$') && "
                "!self.branch.contains('..') && !self.branch.contains('//') && "
                "!self.branch.contains('/.') && !self.branch.contains('.lock/') && "
                "!self.branch.endsWith('/') && !self.branch.endsWith('.') && "
                "!self.branch.endsWith('.lock') && !self.branch.startsWith('refs/') && "
                "self.branch != 'HEAD'",
                BRANCH_TEMPLATE_MESSAGE,
            )
        )
    )

    branch: str = Field(
        default="paddock/{run}",
        min_length=1,
        max_length=200,
        description="The new branch: {run} is the run's name, {thread} its threadId (else "
        "its name), {id} the first 8 characters of its uid. Default: paddock/{run}.",
    )
    commit_message: str | None = Field(
        default=None,
        max_length=65536,
        description="The message of the commit that holds the run's uncommitted changes. "
        "Default: the prompt's first line (the command's, for harness: command).",
    )
    pull_request: PullRequest | None = Field(
        default=None, description="Open a pull request from the branch. Unset: push only."
    )
    credentials_secret: SecretKeySelector = Field(
        description="The Secret key holding a forge access token that may push to the "
        "repository (and open pull requests). Only the operator reads it."
    )
    forge: Forge | None = Field(
        default=None,
        description="github, gitlab or gitea (gitea also for Forgejo). Default: inferred from "
        "the repository's host: github.com; gitlab.com or a host name that contains gitlab; "
        "codeberg.org or a host name that contains gitea or forgejo.",
    )
    only_if: DeliverWhen = Field(
        default=DeliverWhen.SUCCEEDED,
        description="succeeded: deliver only what a run that succeeded did; always: deliver "
        "whatever the run left, however it ended (not a run that never started).",
    )

    @model_validator(mode="after")
    def _branch_template(self) -> Deliver:
        if (
            not re.fullmatch(r"[A-Za-z0-9_{}][A-Za-z0-9._/{}-]*", self.branch)
            or any(bad in self.branch for bad in ("..", "//", "/.", ".lock/"))
            or self.branch.endswith(("/", ".", ".lock"))
            or self.branch.startswith("refs/")
            or self.branch == "HEAD"
        ):
            raise ValueError(BRANCH_TEMPLATE_MESSAGE)
        return self


class Delivery(ApiModel):
    """Where the run's work was delivered."""

    branch: str = Field(description="The branch pushed.")
    commit: str = Field(description="The commit the branch points at.")
    base: str | None = Field(default=None, description="The branch it was made from.")
    pull_request_url: str | None = Field(default=None, description="The pull request's page.")
    pull_request_number: int | None = Field(default=None, description="Its number.")
