"""Files in a sandbox's workspace, as the file operations reach them: a path confined to the
workspace (checked here, and again in the sandbox as it is walked), and the fixed scripts that
read, write and list, which take the path as an argument (never as script text) and bound what
they move. The scripts find the workspace in ``$PADDOCK_WORKSPACE`` (``/workspace`` in a
sandbox's container). Pure.

An agent in the sandbox may swap any directory of the path for a symlink at any moment, so the
scripts never check a path and then use it: they enter each directory in turn and check where
they physically are once inside (a directory entered stays the one entered), and open the last
part relative to it without following a symlink (``dd``'s ``nofollow``: O_NOFOLLOW)."""

from __future__ import annotations

import posixpath

from paddock.client.access import RefusedError

WORKSPACE = "/workspace"
MAX_READ = 1024 * 1024  # bytes a read returns at most
MAX_WRITE = 1024 * 1024  # bytes a write takes at most
MAX_LISTED = 1000  # entries a listing returns at most
MAX_PATH = 4096  # characters of a path (Linux's PATH_MAX)
OUTSIDE = 3  # the scripts' exit code for a path that resolves outside the workspace
LINK = 4  # the scripts' exit code for a last part that is a symlink

# Enter each directory of "$1" (relative to the workspace, normalised), making it first where
# MAKE_DIRS is 1, and check after each step that the shell is physically in the workspace;
# leave the last part in $name.
_WALK = f"""
set -u
unset CDPATH
root=$(cd -P -- "${{PADDOCK_WORKSPACE:-/workspace}}" && pwd -P) || exit 1
cd -- "$root" || exit 1
IFS=/ read -r -a parts <<< "$1"
name=${{parts[-1]}}
unset "parts[-1]"
for part in "${{parts[@]}}"; do
  if [ ! -d "$part" ] && [ "$MAKE_DIRS" = 1 ]; then mkdir -- "$part" || exit 1; fi
  cd -P -- "$part" || exit 1
  case "$(pwd -P)" in "$root"|"$root"/*) ;; *) exit {OUTSIDE};; esac
done
"""
_NOT_A_LINK = f'if [ -L "$name" ]; then exit {LINK}; fi\n'


def workspace_path(path: str) -> str:
    """``path`` (relative to the workspace, or absolute under /workspace) relative to the
    workspace, normalised; ``RefusedError`` for one that leaves it."""
    if not path or "\x00" in path:
        raise RefusedError("a path is needed (relative to the workspace)")
    if "\n" in path:
        raise RefusedError("a path with a newline is not taken")
    if len(path) > MAX_PATH:
        raise RefusedError(f"a path is at most {MAX_PATH} characters; this one has {len(path)}")
    joined = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if joined != WORKSPACE and not joined.startswith(WORKSPACE + "/"):
        raise RefusedError(f"{path} is outside the workspace ({WORKSPACE}); refused")
    return posixpath.relpath(joined, WORKSPACE)


# A write's input is read whole before its script ends, whatever it ends by (a path refused
# on the walk, say): a script that ended with input unread would close the exec's connection
# under the caller's write of it, and lose the exit code that says why.
_DRAIN = "trap 'head -c \"$2\" > /dev/null' EXIT\n"


def _script(
    body: str, label: str, path: str, *args: str, make_dirs: bool = False, drain: bool = False
) -> list[str]:
    walk = ("MAKE_DIRS=1" if make_dirs else "MAKE_DIRS=0") + _WALK
    if drain:  # until the walk is done; then the body reads the input itself
        walk = _DRAIN + walk + "trap - EXIT\n"
    return ["bash", "-c", walk + body, label, workspace_path(path), *args]


def read_command(path: str, limit: int = MAX_READ) -> list[str]:
    """Print the file's size, then at most ``limit`` bytes of it."""
    body = _NOT_A_LINK + (
        'size=$(stat -c %s -- "$name") || exit 1\n'
        'printf "%s\\n" "$size"\n'
        'dd if="$name" iflag=nofollow,count_bytes count="$2" bs=65536 status=none\n'
    )
    return _script(body, "read", path, str(limit))


def write_command(path: str, size: int) -> list[str]:
    """Write exactly ``size`` bytes of stdin to the file (its directories made as needed)."""
    body = 'head -c "$2" | dd of="$name" oflag=nofollow bs=65536 status=none\n'
    return _script(body, "write", path, str(size), make_dirs=True, drain=True)


def list_command(path: str, limit: int = MAX_LISTED) -> list[str]:
    """Each entry of the directory: type (f, d, l, ...), size and name, tab-separated."""
    body = (
        'cd -P -- "$name" || exit 1\n'
        f'case "$(pwd -P)" in "$root"|"$root"/*) ;; *) exit {OUTSIDE};; esac\n'
        'find . -mindepth 1 -maxdepth 1 -printf "%y\\t%s\\t%P\\n" '
        '| LC_ALL=C sort -t "$(printf "\\t")" -k3 | head -n "$2"\n'
    )
    return _script(body, "list", path, str(limit))


def refusal(path: str, exit_code: int, stderr: str) -> str:
    """What the caller is told when a file script failed."""
    if exit_code == OUTSIDE:
        return f"{path} resolves outside the workspace ({WORKSPACE}); refused"
    if exit_code == LINK:
        return f"{path} is a symbolic link; name the file it points to"
    said = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {exit_code}"
    return f"{path}: {said}"


def listing(output: str) -> list[dict[str, object]]:
    kinds = {"f": "file", "d": "directory", "l": "symlink"}
    entries: list[dict[str, object]] = []
    for line in output.splitlines():
        kind, size, name = [*line.split("\t", 2), "", ""][:3]
        entries.append({"name": name, "type": kinds.get(kind, "other"), "size": int(size or 0)})
    return entries
