"""The clone and project init scripts, run by a real bash with a real git on real repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from paddock.api.workspace import WorkspaceSpec
from paddock.render.init_scripts import ASKPASS_SCRIPT, CLONE_SCRIPT, render_project_script
from paddock.render.projections import render_projection


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@e",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@e",
        },
    ).stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A bare repository with three commits on main and a branch "feature"."""
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    for n in range(3):
        (work / "README").write_text(f"version {n}\n")
        git("add", "README", cwd=work)
        git("commit", "-q", "-m", f"commit {n}", cwd=work)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "FEATURE").write_text("feature\n")
    git("add", "FEATURE", cwd=work)
    git("commit", "-q", "-m", "feature", cwd=work)
    bare = tmp_path / "origin.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare


def run_script(
    text: str, tmp_path: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.sh"
    script.write_text(text)
    return subprocess.run(
        ["bash", str(script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PADDOCK_TERMINATION_LOG": str(tmp_path / "term"), **env},
    )


def clone(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "lost+found").mkdir(exist_ok=True)  # a fresh volume is not empty
    result = run_script(CLONE_SCRIPT, tmp_path, {"PADDOCK_WORKSPACE": str(workspace), **env})
    return result, workspace


def test_clone_is_shallow_and_single_branch_by_default(origin: Path, tmp_path: Path) -> None:
    result, workspace = clone(tmp_path, GIT_URL=f"file://{origin}", GIT_DEPTH="1", GIT_REF="main")
    assert result.returncode == 0, result.stderr
    assert (workspace / "README").read_text() == "version 2\n"
    assert git("rev-parse", "--is-shallow-repository", cwd=workspace) == "true"
    assert git("rev-list", "--count", "HEAD", cwd=workspace) == "1"
    assert git("branch", "-r", cwd=workspace) == "origin/main"


def test_full_depth_fetches_the_whole_history_of_the_ref(origin: Path, tmp_path: Path) -> None:
    result, workspace = clone(
        tmp_path, GIT_URL=f"file://{origin}", GIT_DEPTH="full", GIT_REF="feature"
    )
    assert result.returncode == 0, result.stderr
    assert (workspace / "FEATURE").exists()
    assert git("rev-parse", "--is-shallow-repository", cwd=workspace) == "false"
    assert git("rev-list", "--count", "HEAD", cwd=workspace) == "4"


def test_a_second_run_leaves_the_clone_alone(origin: Path, tmp_path: Path) -> None:
    clone(tmp_path, GIT_URL=f"file://{origin}", GIT_DEPTH="1")
    result, _ = clone(tmp_path, GIT_URL=f"file://{origin}", GIT_DEPTH="1")
    assert result.returncode == 0
    assert "already holds a repository" in result.stdout


def test_failed_clone_names_url_and_ref_in_the_termination_message(tmp_path: Path) -> None:
    result, _ = clone(tmp_path, GIT_URL=f"file://{tmp_path}/missing.git", GIT_REF="v9")
    assert result.returncode == 1
    first = (tmp_path / "term").read_text().splitlines()[0]
    assert first == f"clone failed: file://{tmp_path}/missing.git at v9"


def test_askpass_answers_from_the_named_variable_only(tmp_path: Path) -> None:
    env = {"PADDOCK_ASKPASS_TOKEN_VAR": "PADDOCK_GIT_TOKEN", "PADDOCK_GIT_TOKEN": "s3cret"}
    user = run_script(ASKPASS_SCRIPT, tmp_path, env, "Username for 'https://github.com': ")
    assert user.stdout == "x-access-token\n"
    password = run_script(ASKPASS_SCRIPT, tmp_path, env, "Password for 'https://github.com': ")
    assert password.stdout == "s3cret\n"
    # The scripts never hold a token: it is read from the environment when git asks.
    assert "s3cret" not in CLONE_SCRIPT + ASKPASS_SCRIPT


def _files_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    """Lay the projected files out as the ConfigMap volume does."""
    root = tmp_path / "files"
    for path, content in files.items():
        target = root / "project" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return root


def test_project_writes_instructions_links_skills_and_configs(origin: Path, tmp_path: Path) -> None:
    spec = WorkspaceSpec.model_validate(
        {
            "instructions": "Be careful.",
            "scripts": {"test": "make test"},
            "skills": [
                {"name": "local", "git": {"repo": f"file://{origin}", "ref": "feature"}},
                {"name": "docs", "mcp": {"url": "https://mcp.example.com"}},
            ],
        }
    )
    projection = render_projection(spec)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "opencode.json").write_text('{"theme": "mine"}\n')  # the repository's own
    result = run_script(
        render_project_script(projection),
        tmp_path,
        {
            "PADDOCK_WORKSPACE": str(workspace),
            "PADDOCK_FILES": str(_files_dir(tmp_path, projection.files)),
        },
    )
    assert result.returncode == 0, result.stderr
    assert (workspace / "AGENTS.md").read_text().startswith("Be careful.\n")
    for link in ("CLAUDE.md", "GEMINI.md"):
        assert (workspace / link).is_symlink()
        assert (workspace / link).readlink() == Path("AGENTS.md")
    assert (workspace / ".paddock/skills/local/FEATURE").exists()
    assert git("rev-list", "--count", "HEAD", cwd=workspace / ".paddock/skills/local") == "1"
    assert '"docs"' in (workspace / ".mcp.json").read_text()
    assert (workspace / "opencode.json").read_text() == '{"theme": "mine"}\n'
    assert "keeping the repository's opencode.json" in result.stdout
