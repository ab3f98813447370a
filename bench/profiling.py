"""A sampling profile of the operator while a benchmark works it: py-spy attached to its
process, written as collapsed stacks and as a flame graph, and summed up as the frames where
its samples are spent (``--profile DIR`` of the benchmarks that take it).

py-spy samples from outside the process (it reads the interpreter's memory), so the profiled
operator runs as it does unprofiled: no tracing hook, no code of ours in its threads. Only the
thread holding the GIL is sampled (``--gil``): the shares are of the time it computed, not of
threads waiting for an answer or for work."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import TracebackType

RATE = 100  # samples a second


class Profile:
    """``with Profile(pid, directory, name):`` samples the process meanwhile; on exit, the
    collapsed stacks are in ``name.txt`` and the flame graph in ``name.svg``."""

    def __init__(self, pid: int, directory: Path | None, name: str) -> None:
        self.pid, self.directory, self.name = pid, directory, name
        self._samplers: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Profile:
        if self.directory is None:
            return self
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.directory.mkdir(parents=True, exist_ok=True)
        for form, suffix in (("raw", "txt"), ("flamegraph", "svg")):
            out = self.directory / f"{self.name}.{suffix}"
            command = [spy, "record", "--pid", str(self.pid), "--rate", str(RATE), "--gil"]
            command += ["--format", form, "--output", str(out), "--nonblocking"]
            self._samplers.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sampler in self._samplers:
            sampler.send_signal(signal.SIGINT)  # py-spy writes what it has, then exits
        for sampler in self._samplers:
            sampler.wait(timeout=120)

    def summary(self, top: int = 12) -> str:
        """Where the samples went: the frames most often on top of a stack (self), and the
        Paddock frames most often anywhere in one (inclusive), each as a share of all."""
        if self.directory is None:
            return ""
        stacks = self.directory / f"{self.name}.txt"
        if not stacks.exists():
            return f"  profile   {self.name}: no samples (is py-spy installed?)"
        own: Counter[str] = Counter()
        within: Counter[str] = Counter()
        total = 0
        for line in stacks.read_text().splitlines():
            path, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            frames = path.split(";")[1:]  # the first is the thread
            total += int(count)
            if frames:
                own[_short(frames[-1])] += int(count)
            for frame in {_short(f) for f in frames if "paddock" in f}:
                within[frame] += int(count)
        lines = [f"  profile   {self.name}: {total} samples at {RATE}/s, in {stacks.parent}"]
        lines += ["    self:"] + [f"      {n / total:6.1%} {f}" for f, n in own.most_common(top)]
        lines += ["    inclusive (Paddock's frames):"]
        lines += [f"      {n / total:6.1%} {f}" for f, n in within.most_common(top)]
        return "\n".join(lines)


def _short(frame: str) -> str:
    """``function (path/to/module.py:line)`` as ``function (module.py)``."""
    function, _, where = frame.partition(" (")
    return f"{function} ({Path(where.rstrip(')').split(':')[0]).name})"
