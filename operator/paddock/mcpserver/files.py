"""Files in a sandbox's workspace, as the file tools reach them: a path confined to the
workspace (checked here, and again in the sandbox after symlinks are resolved), and the fixed
scripts that read, write and list, which take the path as an argument (never as script text)
and bound what they move. The scripts find the workspace in ``$PADDOCK_WORKSPACE``
(``/workspace`` in a sandbox's container). Pure."""

from __future__ import annotations

import posixpath

from paddock.mcpserver.access import ToolRefusedError

WORKSPACE = "/workspace"
MAX_READ = 1024 * 1024  # bytes a read returns at most
MAX_WRITE = 1024 * 1024  # bytes a write takes at most
MAX_LISTED = 1000  # entries a listing returns at most
OUTSIDE = 3  # the scripts' exit code for a path that resolves outside the workspace

# "$1" (relative to the workspace) resolved, symlinks followed and missing parts allowed, must
# stay in the workspace.
_CONFINED = (
    'root=$(realpath -- "${PADDOCK_WORKSPACE:-/workspace}") || exit 1; '
    'real=$(realpath -m -- "$root/$1") || exit 1; '
    f'case "$real" in "$root"|"$root"/*) ;; *) exit {OUTSIDE};; esac; '
)


def workspace_path(path: str) -> str:
    """``path`` (relative to the workspace, or absolute under /workspace) relative to the
    workspace, normalised; ``ToolRefusedError`` for one that leaves it."""
    if not path or "\x00" in path:
        raise ToolRefusedError("a path is needed (relative to the workspace)")
    joined = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if joined != WORKSPACE and not joined.startswith(WORKSPACE + "/"):
        raise ToolRefusedError(f"{path} is outside the workspace ({WORKSPACE}); refused")
    return posixpath.relpath(joined, WORKSPACE)


def read_command(path: str, limit: int = MAX_READ) -> list[str]:
    """Print the file's size, then at most ``limit`` bytes of it."""
    script = _CONFINED + 'stat -c %s -- "$real" && head -c "$2" -- "$real"'
    return ["sh", "-c", script, "read", workspace_path(path), str(limit)]


def write_command(path: str, size: int) -> list[str]:
    """Write exactly ``size`` bytes of stdin to the file (its directory made as needed)."""
    script = _CONFINED + 'mkdir -p -- "$(dirname -- "$real")" && head -c "$2" > "$real"'
    return ["sh", "-c", script, "write", workspace_path(path), str(size)]


def list_command(path: str, limit: int = MAX_LISTED) -> list[str]:
    """Each entry of the directory: type (f, d, l, ...), size and name, tab-separated."""
    script = _CONFINED + (
        'cd -- "$real" && find . -mindepth 1 -maxdepth 1 -printf "%y\\t%s\\t%P\\n" '
        '| LC_ALL=C sort -t "$(printf "\\t")" -k3 | head -n "$2"'
    )
    return ["sh", "-c", script, "list", workspace_path(path), str(limit)]


def refusal(path: str, exit_code: int, stderr: str) -> str:
    """What the caller is told when a file script failed."""
    if exit_code == OUTSIDE:
        return f"{path} resolves outside the workspace ({WORKSPACE}); refused"
    said = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {exit_code}"
    return f"{path}: {said}"


def listing(output: str) -> list[dict[str, object]]:
    kinds = {"f": "file", "d": "directory", "l": "symlink"}
    entries: list[dict[str, object]] = []
    for line in output.splitlines():
        kind, size, name = [*line.split("\t", 2), "", ""][:3]
        entries.append({"name": name, "type": kinds.get(kind, "other"), "size": int(size or 0)})
    return entries
