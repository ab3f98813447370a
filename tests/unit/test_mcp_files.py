"""The file tools' confinement, as pure logic: a path is taken relative to the workspace or
absolute under /workspace, and refused when it leaves it; the scripts take it as an argument,
never as script text (the sandbox-side check of symlinks is tested in tests/integration)."""

from __future__ import annotations

import pytest

from paddock.mcpserver import files
from paddock.mcpserver.access import ToolRefusedError


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
    "path", ["../etc/passwd", "/etc/passwd", "a/../../b", "/workspacex/y", "", "a\x00b"]
)
def test_paths_that_leave_the_workspace_are_refused(path: str) -> None:
    with pytest.raises(ToolRefusedError):
        files.workspace_path(path)


def test_a_path_reaches_the_script_as_an_argument_never_as_its_text() -> None:
    hostile = "$(touch pwned); `id`; x"
    for argv in (
        files.read_command(hostile),
        files.write_command(hostile, 3),
        files.list_command(hostile),
    ):
        assert argv[:2] == ["sh", "-c"]
        assert hostile not in argv[2]
        assert argv[4] == hostile


def test_a_listing_is_read_into_entries() -> None:
    out = "d\t4096\tsrc\nf\t12\tREADME.md\nl\t7\tlink\n"
    assert files.listing(out) == [
        {"name": "src", "type": "directory", "size": 4096},
        {"name": "README.md", "type": "file", "size": 12},
        {"name": "link", "type": "symlink", "size": 7},
    ]
