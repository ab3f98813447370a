"""The operator's own git, in a bare repository of its own for one delivery: the forge's base
branch is fetched into it, the sandbox's bundle is checked against that and read into it, and
the result is pushed from it. Nothing of the sandbox's repository (its config, its hooks) is
ever read: a bundle is only objects and refs, checked as they are read (fsck).

The token reaches git as an HTTP header in git's environment, never in a URL, an argument or a
file; redirects are not followed (the header would go with them)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from paddock.forge.errors import DeliveryError
from paddock.forge.repos import Repository, basic_auth

GIT_TIMEOUT = 300.0
MAX_TEXT_BYTES = 8 << 20  # the CI definitions' text a delivery reads at most
DEEPENINGS = (50, 500, None)  # how much of the base branch to fetch: then more, then all


@dataclass(frozen=True)
class Pushed:
    commit: str
    already: bool  # the branch held this work already (a delivery tried again)


class Workbench:
    """One delivery's bare repository, removed when the ``with`` block ends."""

    def __init__(self, repo: Repository, token: str) -> None:
        self.repo = repo
        self._token = token
        self._dir = tempfile.TemporaryDirectory(prefix="paddock-delivery-")
        self.path = Path(self._dir.name)
        settings = {
            "http.extraHeader": f"Authorization: {basic_auth(repo.forge, token)}",
            "http.followRedirects": "false",
            "transfer.fsckObjects": "true",
            "protocol.allow": "never",
            "protocol.https.allow": "always",
            "protocol.http.allow": "always",
            "protocol.file.allow": "always",  # the bundle, a file of this directory
            "core.hooksPath": "/dev/null",
            "init.defaultBranch": "main",
        }
        self._env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.path),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_COUNT": str(len(settings)),
            **{f"GIT_CONFIG_KEY_{i}": key for i, key in enumerate(settings)},
            **{f"GIT_CONFIG_VALUE_{i}": value for i, value in enumerate(settings.values())},
        }
        self.git("init", "-q", "--bare", ".")

    def __enter__(self) -> Workbench:
        return self

    def __exit__(self, *_: object) -> None:
        self._dir.cleanup()

    def git(
        self, *args: str, check: bool = True, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """git in the workbench. Its output is read as bytes and decoded as it is (bytes that
        are not UTF-8 kept by surrogateescape, no newline translation): a path or a link of
        the sandbox's is any bytes but NUL and "/"."""
        try:
            done = subprocess.run(
                ["git", *args], cwd=self.path, env=self._env, capture_output=True, input=stdin,
                timeout=GIT_TIMEOUT, check=False,
            )  # fmt: skip
        except FileNotFoundError:
            raise DeliveryError("the operator has no git program", refused=False) from None
        except subprocess.TimeoutExpired:
            raise DeliveryError(
                f"git {args[0]} took longer than {GIT_TIMEOUT:.0f}s", False
            ) from None
        out = done.stdout.decode(errors="surrogateescape")
        err = done.stderr.decode(errors="surrogateescape")
        if check and done.returncode != 0:
            raise DeliveryError(self.said(err), refused=_refused(err))
        return subprocess.CompletedProcess(done.args, done.returncode, out, err)

    def said(self, stderr: str) -> str:
        """git's last lines, with the token taken out wherever it might appear."""
        lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
        text = " ".join(lines[-4:])[-600:] or "git failed without a word"
        return text.replace(self._token, "[token]")

    # -- the forge -----------------------------------------------------------------------------

    def remote_branches(self, *names: str) -> dict[str, str]:
        """Which of the branches exist on the forge, and their commits."""
        refs = [f"refs/heads/{name}" for name in names]
        listed = self.git("ls-remote", "--", self.repo.url, *refs).stdout
        found: dict[str, str] = {}
        for line in listed.splitlines():
            sha, _, ref = line.partition("\t")
            found[ref] = sha
        return {name: found[ref] for name, ref in zip(names, refs, strict=True) if ref in found}

    def default_branch(self) -> str:
        listed = self.git("ls-remote", "--symref", "--", self.repo.url, "HEAD").stdout
        for line in listed.splitlines():
            if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
                return line.removeprefix("ref: refs/heads/").removesuffix("\tHEAD")
        raise DeliveryError(f"{self.repo.url} has no default branch to deliver against")

    def fetch_base(self, base: str, needed: list[str]) -> None:
        """The base branch as refs/paddock/base, deep enough to hold every commit in
        ``needed``; DeliveryError naming one it never holds."""
        for depth in DEEPENINGS:
            how = [f"--depth={depth}"] if depth else (["--unshallow"] if self._shallow() else [])
            refspec = f"+refs/heads/{base}:refs/paddock/base"
            self.git("fetch", "-q", "--no-tags", *how, "--", self.repo.url, refspec)
            missing = [sha for sha in needed if not self.has(sha)]
            if not missing:
                return
        raise DeliveryError(
            f"the sandbox's work does not start from {base}: commit {missing[0][:12]} is not in "
            "its history"
        )

    def _shallow(self) -> bool:
        return (self.path / "shallow").exists()

    def has(self, sha: str) -> bool:
        return self.git("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

    # -- the sandbox's work --------------------------------------------------------------------

    def read_bundle(self, bundle: Path, ref: str) -> str:
        """The bundle's ``ref`` as refs/paddock/head (objects checked as they are read)."""
        self.git("fetch", "-q", "--no-tags", "--", str(bundle), f"+{ref}:refs/paddock/head")
        return self.git("rev-parse", "refs/paddock/head").stdout.strip()

    def descends_from_base(self, shas: list[str]) -> bool:
        return all(
            self.git(
                "merge-base", "--is-ancestor", sha, "refs/paddock/base", check=False
            ).returncode
            == 0
            for sha in shas
        )

    def new_commits(self) -> int:
        out = self.git("rev-list", "--count", "refs/paddock/base..refs/paddock/head").stdout
        return int(out.strip())

    def changed_paths(self) -> list[str]:
        """What a pull request from the work against the base shows: the paths changed since
        their merge base."""
        return self._diff("refs/paddock/base...refs/paddock/head")

    def differing_paths(self) -> list[str]:
        """The paths whose content differs between the base branch as it is and the work:
        with ``changed_paths``, what pushing the work changes, including what the work left as
        it was in an older commit of the base (its merge base) that the base changed since."""
        return self._diff("refs/paddock/base", "refs/paddock/head")

    def _diff(self, *revisions: str) -> list[str]:
        out = self.git("diff", "--name-only", "--no-renames", "-z", *revisions, "--").stdout
        return [path for path in out.split("\0") if path]

    def links(self) -> dict[str, str]:
        """The symbolic links of the work's commit: path and target."""
        return self._read({p: oid for p, (mode, oid) in self._tree().items() if mode == "120000"})

    def texts(self, places: Iterable[str]) -> dict[str, str] | None:
        """The text of each file of the work's commit in ``places`` (files or directories,
        case ignored); None when they hold more than MAX_TEXT_BYTES."""
        folded = tuple(place.casefold() for place in places)
        files = {
            path: oid
            for path, (mode, oid) in self._tree().items()
            if mode.startswith("100")
            and any(path.casefold() == p or path.casefold().startswith(p + "/") for p in folded)
        }
        if not files:
            return {}
        asked = "".join(f"{oid}\n" for oid in files.values()).encode()
        sizes = self.git("cat-file", "--batch-check=%(objectsize)", stdin=asked).stdout
        if sum(int(size) for size in sizes.split()) > MAX_TEXT_BYTES:
            return None
        return self._read(files)

    def _tree(self) -> dict[str, tuple[str, str]]:
        """Each entry of the work's commit: path, and its mode and object."""
        listed = self.git("ls-tree", "-r", "-z", "--full-tree", "refs/paddock/head").stdout
        entries = {}
        for entry in listed.split("\0"):
            info, _, path = entry.partition("\t")
            if path:
                mode, _, rest = info.partition(" ")
                entries[path] = (mode, rest.split()[-1])
        return entries

    def _read(self, objects: dict[str, str]) -> dict[str, str]:
        """The content of each path's object (``objects``: path and object), as text."""
        if not objects:
            return {}
        asked = "".join(f"{oid}\n" for oid in objects.values()).encode()
        read = self.git("cat-file", "--batch", stdin=asked).stdout.encode(errors="surrogateescape")
        contents = []
        for _ in objects:
            header, _, read = read.partition(b"\n")
            size = int(header.split()[2])
            contents.append(read[:size].decode(errors="surrogateescape"))
            read = read[size + 1 :]
        return dict(zip(objects, contents, strict=True))

    def same_work(self, commit: str, existing: str) -> bool:
        """Whether the commit on the forge holds the same files on the same parents (a delivery
        tried again makes a new commit of the same changes)."""
        self.git("fetch", "-q", "--no-tags", "--depth=2", "--", self.repo.url, existing)

        def shape(sha: str) -> str:
            return self.git("rev-parse", f"{sha}^{{tree}}", f"{sha}^@").stdout

        return shape(commit) == shape(existing)

    def push(self, branch: str) -> None:
        """A new branch only: no force, so the forge refuses anything but its creation or a
        fast-forward (and the caller has checked it does not exist)."""
        self.git("push", "-q", "--no-verify", "--", self.repo.url,
                 f"refs/paddock/head:refs/heads/{branch}")  # fmt: skip


def _refused(stderr: str) -> bool:
    """A refusal (the forge answered no) rather than a forge out of reach."""
    unreachable = ("could not resolve host", "connection refused", "timed out",
                   "failed to connect", "returned error: 5", "early eof")  # fmt: skip
    text = stderr.lower()
    return not any(sign in text for sign in unreachable)
