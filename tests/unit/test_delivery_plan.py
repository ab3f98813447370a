"""The pure parts of a delivery: which forge and API a repository URL names, which paths are
CI workflows, the branch a template makes, the spec's checks, and the faces' options."""

from __future__ import annotations

import argparse
import base64

import pytest
from pydantic import ValidationError

from paddock.api.agentrun import AgentRunSpec
from paddock.api.delivery import Forge
from paddock.cli.runs import _delivering
from paddock.client.runs import Delivering, run_manifest
from paddock.forge.errors import DeliveryError
from paddock.forge.repos import basic_auth, branch_name, repository, workflow_changes
from paddock.render.delivery import commit_message


@pytest.mark.parametrize(
    ("url", "forge", "api", "path"),
    [
        ("https://github.com/o/r.git", Forge.GITHUB, "https://api.github.com", "o/r"),
        ("https://ghe.corp.example/o/r", None, None, None),  # not told: must be named
        ("https://gitlab.com/group/sub/r.git", Forge.GITLAB, "https://gitlab.com/api/v4",
         "group/sub/r"),
        ("https://gitea.example.org:3000/o/r", Forge.GITEA, "https://gitea.example.org:3000/api/v1",
         "o/r"),
        ("https://codeberg.org/o/r", Forge.GITEA, "https://codeberg.org/api/v1", "o/r"),
    ],
)  # fmt: skip
def test_the_forge_and_its_api_are_told_from_the_url(
    url: str, forge: Forge | None, api: str | None, path: str | None
) -> None:
    if forge is None:
        with pytest.raises(DeliveryError, match=r"set spec\.deliver\.forge"):
            repository(url, None)
        return
    repo = repository(url, None)
    assert (repo.forge, repo.api, repo.path) == (forge, api, path)


def test_a_named_forge_wins_and_enterprise_github_has_its_api_under_the_host() -> None:
    repo = repository("https://ghe.corp.example/o/r", Forge.GITHUB)
    assert repo.api == "https://ghe.corp.example/api/v3"


@pytest.mark.parametrize("url", ["git@github.com:o/r.git", "ssh://git@github.com/o/r",
                                 "/srv/repo", "https://github.com/justone"])  # fmt: skip
def test_what_cannot_be_pushed_to_with_a_token_is_refused_saying_why(url: str) -> None:
    with pytest.raises(DeliveryError):
        repository(url, Forge.GITHUB)


def test_the_token_goes_in_a_header_as_each_forge_expects() -> None:
    user, _, token = base64.b64decode(basic_auth(Forge.GITLAB, "t0k").split()[1]).partition(b":")
    assert (user, token) == (b"oauth2", b"t0k")
    assert base64.b64decode(basic_auth(Forge.GITHUB, "t")[6:]).startswith(b"x-access-token:")


def test_workflow_files_of_every_forge_are_found() -> None:
    paths = [".github/workflows/ci.yml", ".gitea/workflows/a.yaml", ".forgejo/workflows/b.yml",
             ".gitlab-ci.yml", ".gitlab/ci/x.yml", ".github/actions/setup/action.yml",
             ".github/workflows", ".GitHub/Workflows/x.yml",
             "src/.github/workflows/no.yml", ".github/CODEOWNERS", "docs/.gitlab-ci.yml.md",
             ".github/workflows-notes.md"]  # fmt: skip
    assert workflow_changes(paths) == paths[:8]


def test_the_branch_template_is_filled_in() -> None:
    uid = "1b2c3d4e-aaaa-bbbb-cccc-000000000000"
    assert branch_name("paddock/{run}", "fix", None, uid) == "paddock/fix"
    assert branch_name("agent/{thread}/{id}", "fix", "t1", uid) == "agent/t1/1b2c3d4e"
    assert branch_name("{thread}", "fix", None, uid) == "fix"


BASE_SPEC = {"harness": "command", "command": "true", "sandboxRef": {"name": "box"}}


@pytest.mark.parametrize("branch", ["-x", "/x", "a..b", "a//b", "x/", "x.lock", "a b", "a~1"])
def test_a_branch_git_would_refuse_is_refused_by_the_spec(branch: str) -> None:
    deliver = {"branch": branch, "credentialsSecret": {"name": "t", "key": "token"}}
    with pytest.raises(ValidationError, match="branch is a git branch name"):
        AgentRunSpec.model_validate({**BASE_SPEC, "deliver": deliver})


def test_the_token_secret_is_one_the_run_needs_before_it_starts() -> None:
    deliver = {"credentialsSecret": {"name": "forge", "key": "token"}}
    spec = AgentRunSpec.model_validate({**BASE_SPEC, "deliver": deliver})
    assert ("forge", "token") in spec.secret_refs()


def test_the_commit_message_is_the_specs_else_the_tasks_first_line() -> None:
    spec = AgentRunSpec.model_validate({**BASE_SPEC, "harness": "claude-code", "command": None,
                                        "prompt": "Fix the test\nand more"})  # fmt: skip
    assert commit_message(spec, "r").splitlines()[0] == "Fix the test"
    assert "AgentRun r" in commit_message(spec, "r")
    deliver = {"commitMessage": "Mine", "credentialsSecret": {"name": "t", "key": "k"}}
    spec = AgentRunSpec.model_validate({**BASE_SPEC, "deliver": deliver})
    assert commit_message(spec, "r") == "Mine"


def test_the_faces_build_the_same_spec_deliver() -> None:
    asked = Delivering("forge:pat", "x/{run}", True, "dev", "T", True, "gitea", True)
    manifest = run_manifest(harness="command", command="true", sandbox="box", deliver=asked)
    assert manifest["spec"]["deliver"] == {
        "credentialsSecret": {"name": "forge", "key": "pat"}, "branch": "x/{run}",
        "forge": "gitea", "onlyIf": "always",
        "pullRequest": {"base": "dev", "title": "T", "draft": True},
    }  # fmt: skip
    assert Delivering("forge").spec() == {"credentialsSecret": {"name": "forge", "key": "token"}}
    AgentRunSpec.model_validate(manifest["spec"])


def test_the_cli_refuses_delivery_options_without_a_token() -> None:
    args = argparse.Namespace(deliver=None, branch=None, pull_request=True, base=None,
                              title=None, draft=False, forge=None,
                              deliver_always=False)  # fmt: skip
    with pytest.raises(ValueError, match="go with --deliver"):
        _delivering(args)
