"""The pure parts of a delivery: which forge and API a repository URL names, which paths are
CI workflows, the branch a template makes, the spec's checks, and the faces' options."""

from __future__ import annotations

import argparse
import base64
import subprocess

import pytest
from pydantic import ValidationError

from paddock.api.agentrun import AgentRunSpec
from paddock.api.delivery import Forge
from paddock.cli.runs import _delivering
from paddock.client.runs import Delivering, run_manifest
from paddock.forge.errors import DeliveryError
from paddock.forge.repos import (
    MAX_CI_PLACES,
    basic_auth,
    branch_name,
    branch_problem,
    referenced_places,
    repository,
    workflow_changes,
)
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
             ".github/workflows", ".GitHub/Workflows/x.yml", ".github", ".woodpecker.yml",
             ".woodpecker/build.yaml", ".drone.yml", ".circleci/config.yml",
             "azure-pipelines.yml", ".buildkite/pipeline.yml", "Jenkinsfile", ".travis.yml",
             "bitbucket-pipelines.yml",
             "src/.github/workflows/no.yml", ".github/CODEOWNERS", "docs/.gitlab-ci.yml.md",
             ".github/workflows-notes.md", "src/Jenkinsfile.md", "woodpecker.yml"]  # fmt: skip
    assert workflow_changes(paths, {}) == paths[:18]


# What a pull request changes, the head's symbolic links, and which changes are to CI.
LINKED = [
    # .github made a link to a directory holding workflows/: the link, and what it leads to.
    ([".github", "ci/workflows/x.yml", "ci/README.md"], {".github": "ci"},
     [".github", "ci/workflows/x.yml"]),
    # A link already there: a change where it leads is a change of the workflow.
    (["shared/build.yml"], {".github/workflows/build.yml": "../../shared/build.yml"},
     ["shared/build.yml"]),
    (["shared/deep/x.yml", "shared/other.yml"], {".github/workflows": "../shared/deep"},
     ["shared/deep/x.yml"]),
    # Links through links, and a link above the link.
    (["a/b/c/x.yml", "a/x.yml"], {".woodpecker": "w", "w": "a/b/c"}, ["a/b/c/x.yml"]),
    (["b", "b/ci/x"], {".gitlab": "a", "a/ci": "../b/ci"}, ["b", "b/ci/x"]),
    # A submodule (a changed gitlink) where a CI definition is, or above one.
    ([".github", ".circleci"], {}, [".github", ".circleci"]),
    # The repository itself made a CI directory: everything is CI.
    (["main.py"], {".tekton": "."}, ["main.py"]),
    # Links out of the repository, and links elsewhere, change nothing.
    (["etc/ci.yml", "docs/x"], {".drone.yml": "/etc/ci.yml", "docs": "../..", "x": "docs"}, []),
    # Links in a loop end.
    (["p/q"], {".circleci": "p", "p": ".circleci"}, ["p/q"]),
    # ".." after a link goes up from where the link leads, as the file system resolves it.
    (["lib", "a/b/x/action.yml", "x/action.yml"],
     {".github/actions/setup": "../../lib/../x", "lib": "a/b/c"}, ["lib", "a/b/x/action.yml"]),
    # Case is folded as a case-insensitive file system folds it.
    (["Jenkin\u017ffile", ".GITHUB/WORKFLOWS/X.YML"], {}, ["Jenkin\u017ffile",
                                                           ".GITHUB/WORKFLOWS/X.YML"]),
]  # fmt: skip


@pytest.mark.parametrize(("changed", "links", "ci"), LINKED)
def test_a_change_reaching_a_ci_definition_through_links_or_submodules_is_found(
    changed: list[str], links: dict[str, str], ci: list[str]
) -> None:
    assert workflow_changes(changed, links) == ci


def test_links_making_too_many_places_ci_refuse_every_change() -> None:
    links = {f".github/workflows/l{i}": f"../../d{i}" for i in range(MAX_CI_PLACES)}
    assert workflow_changes(["README.md"], links) == ["README.md"]


def test_the_branch_template_is_filled_in() -> None:
    uid = "1b2c3d4e-aaaa-bbbb-cccc-000000000000"
    assert branch_name("paddock/{run}", "fix", None, uid) == "paddock/fix"
    assert branch_name("agent/{thread}/{id}", "fix", "t1", uid) == "agent/t1/1b2c3d4e"
    assert branch_name("{thread}", "fix", None, uid) == "fix"
    with pytest.raises(DeliveryError, match="names another ref"):
        branch_name("{thread}", "fix", "HEAD", uid)


# Names git takes as a branch or refuses; the last ones git takes, but not as a new branch.
BRANCHES = ["paddock/fix", "a.b/c_d-e", "x@y", "a/.b", ".a", "a..b", "a//b", "a/", "/a", "a.",
            "a.lock", "a.lock/b", "a b", "a\tb", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b",
            "a@{1}", "a\x7fb", "HEAD", "-x"]  # fmt: skip
NOT_NEW = ["refs/heads/main", "refs/tags/v1", "@"]


@pytest.mark.parametrize("name", BRANCHES + NOT_NEW)
def test_a_branch_name_is_one_git_makes_a_new_branch_of(name: str) -> None:
    by_git = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True)
    takes = by_git.returncode == 0 and name not in NOT_NEW
    assert (branch_problem(name) is None) == takes, (name, by_git.stderr)


BASE_SPEC = {"harness": "command", "command": "true", "sandboxRef": {"name": "box"}}


SPEC_REFUSES = ["-x", "/x", "a..b", "a//b", "x/", "x.lock", "a b", "a~1", "HEAD", "refs/heads/x",
                "a/.b", ".a", "a.lock/b", "a."]  # fmt: skip


@pytest.mark.parametrize("branch", SPEC_REFUSES)
def test_a_branch_git_would_refuse_is_refused_by_the_spec(branch: str) -> None:
    deliver = {"branch": branch, "credentialsSecret": {"name": "t", "key": "token"}}
    with pytest.raises(ValidationError, match="branch is a new git branch's name"):
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


@pytest.mark.parametrize(
    ("text", "places"),
    [
        ("steps:\n  - uses: ./tools/lint\n  - uses: actions/checkout@v4\n", {"tools/lint"}),
        ("  - uses: './.github/actions/x'  # ours\n", {".github/actions/x"}),
        ("uses: ./one/../two\n", {"two"}),  # normalised
        ("steps: [{uses: ./a}, {'uses': \"\\x2e/b\"}]\n", {"a", "b"}),  # flow, escapes
        ("env: {A: &x ./c}\nuses: *x\n", {"c"}),  # an alias
        ("uses: ./../outside\n", set()),  # out of the repository
        ("uses: ./\n", None),  # the repository itself: everything counts
        (
            "include:\n  - local: '/ci/build.yml'\n  - '/ci/more.yml'\n  - short.yml\n",
            {"ci/build.yml", "ci/more.yml", "short.yml"},
        ),
        ("trigger:\n  include: ci/child.yml\n", {"ci/child.yml"}),
        ("include:\n  - local: ci/*.yml\n", None),  # a glob: everything counts
        ("include:\n  - project: a/b\n    file: '/t.yml'\n  - remote: https://x/y.yml\n", set()),
        ("test:\n  script: !reference [.setup, script]\n", set()),  # GitLab's tag, read
        ("strategy:\n  matrix:\n    include:\n      - os: linux\n", set()),
        ("a: [\n", None),  # no YAML: everything counts
    ],
)
def test_a_ci_definition_names_the_places_it_runs_from_the_repository(
    text: str, places: set[str] | None
) -> None:
    assert referenced_places({"ci.yml": text}) == places
    assert referenced_places({"Jenkinsfile": text}) == set()  # read as YAML only when it is
