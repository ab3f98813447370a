"""The file tools' confinement: a path is taken relative to the workspace or absolute under
/workspace, and refused when it leaves it; the scripts take it as an argument, never as script
text; and the scripts, run here by bash on a real directory, never read or write outside it,
also while a symlink is swapped in and out under them (the tools' calls through a sandbox are
tested in tests/integration)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from paddock.client import files
from paddock.client.access import RefusedError


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("src/main.py", "src/main.py"),
        ("./src/../README.md", "README.md"),
        ("/workspace/build/out.txt", "build/out.txt"),
        (".", "."),
        ("/workspace", "."),
    ],
)
def test_paths_in_the_workspace_are_taken_relative_to_it(path: str, relative: str) -> None:
    assert files.workspace_path(path) == relative


@pytest.mark.parametrize(
    "path", ["../etc/passwd", "/etc/passwd", "a/../../b", "/workspacex/y", "", "a\x00b", "a\nb"]
)
def test_paths_that_leave_the_workspace_are_refused(path: str) -> None:
    with pytest.raises(RefusedError):
        files.workspace_path(path)


def test_a_path_reaches_the_script_as_an_argument_never_as_its_text() -> None:
    hostile = "$(touch pwned); `id`; x"
    for argv in (
        files.read_command(hostile),
        files.write_command(hostile, 3),
        files.list_command(hostile),
    ):
        assert argv[:2] == ["bash", "-c"]
        assert hostile not in argv[2]
        assert argv[4] == hostile


def test_a_listing_is_read_into_entries() -> None:
    out = "d\t4096\tsrc\nf\t12\tREADME.md\nl\t7\tlink\n"
    assert files.listing(out) == [
        {"name": "src", "type": "directory", "size": 4096},
        {"name": "README.md", "type": "file", "size": 12},
        {"name": "link", "type": "symlink", "size": 7},
    ]


def test_a_path_too_long_for_the_kernel_is_refused_in_a_sentence() -> None:
    with pytest.raises(RefusedError, match="at most 4096 characters"):
        files.workspace_path("a/" * 100_000)


def _run(argv: list[str], workspace: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {"PADDOCK_WORKSPACE": str(workspace), "PATH": "/usr/bin:/bin"}
    return subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    (workspace / "src").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("outside")
    (workspace / "src" / "a.txt").write_text("inside\n")
    (workspace / "inner").symlink_to("src")
    (workspace / "escape").symlink_to(outside)
    (workspace / "link.txt").symlink_to(outside / "secret")
    return workspace, outside


def test_the_scripts_read_write_and_list_inside_and_follow_inner_directory_links(
    tree: tuple[Path, Path],
) -> None:
    workspace, _ = tree
    wrote = _run(files.write_command("new/dir/b.txt", 3), workspace, "abcdef")
    assert wrote.returncode == 0, wrote.stderr
    assert (workspace / "new" / "dir" / "b.txt").read_text() == "abc"
    read = _run(files.read_command("inner/a.txt"), workspace)
    assert (read.returncode, read.stdout) == (0, "7\ninside\n")
    listed = _run(files.list_command("inner"), workspace)
    assert files.listing(listed.stdout) == [{"name": "a.txt", "type": "file", "size": 7}]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (files.read_command("escape/secret"), files.OUTSIDE),
        (files.write_command("escape/x", 1), files.OUTSIDE),
        (files.list_command("escape"), files.OUTSIDE),
        (files.read_command("link.txt"), files.LINK),
    ],
    ids=["read-through-dir-link", "write-through-dir-link", "list-dir-link", "read-file-link"],
)
def test_links_out_of_the_workspace_are_refused(
    tree: tuple[Path, Path], argv: list[str], code: int
) -> None:
    workspace, outside = tree
    done = _run(argv, workspace, "x")
    assert done.returncode == code, done.stderr
    assert "outside" not in done.stdout
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_a_refused_write_reads_its_whole_input_before_it_ends(tree: tuple[Path, Path]) -> None:
    """Else the exec's connection closes under the caller's write, and the exit code that
    says why is lost (seen as a tool's unexpected error under load)."""
    workspace, _ = tree
    size = 256 * 1024  # more than a pipe holds
    env = {"PADDOCK_WORKSPACE": str(workspace), "PATH": "/usr/bin:/bin"}
    argv = files.write_command("escape/x", size)
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdin is not None
    process.stdin.write(b"x" * size)  # BrokenPipeError if the script ended without reading it
    process.stdin.close()
    assert process.wait(timeout=30) == files.OUTSIDE


def test_a_write_through_a_link_to_a_file_outside_does_not_follow_it(
    tree: tuple[Path, Path],
) -> None:
    workspace, outside = tree
    done = _run(files.write_command("link.txt", 2), workspace, "no")
    assert done.returncode != 0
    assert (outside / "secret").read_text() == "outside"


def test_a_directory_swapped_for_a_link_while_writing_never_lets_a_write_out(
    tmp_path: Path,
) -> None:
    """What a check-then-write lost to: a directory of the path becomes a symlink out of the
    workspace between the check and the write. An agent swaps it as fast as it can while the
    tool writes through it again and again; no write lands outside."""
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    swap = 'cd "$1"; while :; do rm -rf d; mkdir d; rm -rf d; ln -s "$2" d; done'
    swapper = subprocess.Popen(
        ["bash", "-c", swap, "swap", str(workspace), str(outside)], stderr=subprocess.DEVNULL
    )
    try:
        landed = 0
        for _ in range(300):
            done = _run(files.write_command("d/x", 1), workspace, "x")
            landed += done.returncode == 0
            assert not (outside / "x").exists(), "a write went through the swapped-in link"
    finally:
        swapper.kill()
        swapper.wait()
    assert landed, "no write found the directory in place: the race was never run"
