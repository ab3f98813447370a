"""shfmt (mvdan/sh), run as a parser only: the syntax tree of a bash script, with bounded
memory, CPU and time, so that no command can exhaust the operator."""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import subprocess
import sysconfig
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

Node = dict[str, Any]

PARSE_TIMEOUT = 10.0  # seconds; shfmt reads even a long script in milliseconds
SHFMT_CPU_SECONDS = 5
SHFMT_MEMORY = 256 << 20  # bytes of data
MAX_TREE_BYTES = 32 << 20  # shfmt's JSON of one command; a long setup script's is ~1 MiB


class ShellSyntaxError(ValueError):
    """The text is not a command bash would run, or one Paddock cannot read as bash does."""


@cache
def shfmt_path() -> str:
    """shfmt as the ``shfmt-py`` wheel installs it: next to this Python, else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "shfmt"
    found = str(beside) if beside.is_file() else shutil.which("shfmt")
    if found is None:
        raise RuntimeError("shfmt is not installed (pip install shfmt-py)")
    return found


def syntax_tree(data: bytes, language: str = "bash") -> Node:
    """shfmt's syntax tree of ``data``, read as ``language`` (bash, or posix: the sh of dash,
    where bash's keywords are plain names and its other syntax is refused). Its JSON is
    indented by depth, so a deeply nested command makes a tree far larger than itself: shfmt
    gets bounded memory, CPU and time, and a tree over MAX_TREE_BYTES is refused, so no
    command can exhaust the operator."""
    process = subprocess.Popen(
        [shfmt_path(), "-ln", language, "--to-json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # Set before shfmt is given anything to read: it can allocate nothing large until then.
    resource.prlimit(process.pid, resource.RLIMIT_DATA, (SHFMT_MEMORY, SHFMT_MEMORY))
    resource.prlimit(process.pid, resource.RLIMIT_CPU, (SHFMT_CPU_SECONDS, SHFMT_CPU_SECONDS))
    timer = threading.Timer(PARSE_TIMEOUT, process.kill)
    timer.start()
    try:
        out = _read(process, data)
        err = process.stderr.read() if process.stderr else b""
        process.wait()
    finally:
        timer.cancel()
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    if out is None:
        raise ShellSyntaxError("too deeply nested to judge")
    if process.returncode != 0:
        message = err.decode(errors="replace").strip().removeprefix("<standard input>:")
        message = message.removesuffix("; tried parsing as posix")
        if process.returncode < 0 or message.startswith(("fatal error", "runtime:")):
            message = "too deeply nested to judge, or not parsed in time"
        raise ShellSyntaxError(message or "the command cannot be parsed")
    try:
        tree: Node = json.loads(out)
    except RecursionError:
        raise ShellSyntaxError("too deeply nested to judge") from None
    return tree


def _read(process: subprocess.Popen[bytes], data: bytes) -> bytes | None:
    """What shfmt writes for ``data``, or None past MAX_TREE_BYTES."""
    assert process.stdin is not None
    assert process.stdout is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write(data)
        process.stdin.close()
    chunks, size = [], 0
    while chunk := process.stdout.read(1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_TREE_BYTES:
            return None
    return b"".join(chunks)


def nodes(tree: Any, stop: str | None = None) -> Iterator[Node]:
    """Every node of the tree, in source order: a command nested anywhere is found (not
    below a node of type ``stop``). A stack, not recursion: nesting as deep as shfmt accepts
    is fine."""
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            if stop is None or node.get("Type") != stop:
                stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
