"""The local cluster's git forge (Gitea), as the tests use it: repositories and tokens through
its API, as its administrator; what a branch holds, through git."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddock_dev import cluster as local
from paddock_dev import forge
from paddock_dev.processes import ClusterState


def forge_state() -> ClusterState:
    state = ClusterState.load(local.default_state_dir())
    assert state is not None, "the local cluster is not up"
    return state


def started() -> forge.Forge:
    """The forge of the local cluster (the ``cluster`` fixture has it up), started if needed."""
    return forge.ensure(local.ensure_binaries(forge=True), forge_state())


@dataclass(frozen=True)
class ForgeClient:
    forge: forge.Forge

    def api(self, method: str, path: str, body: Any = None) -> Any:
        pair = f"{self.forge.admin}:{self.forge.password}".encode()
        request = urllib.request.Request(  # noqa: S310  (the local forge's http URL)
            f"{self.forge.url}/api/v1{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json",
                     "Authorization": "Basic " + base64.b64encode(pair).decode()},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:300]!r}") from None

    def token(self, name: str, *scopes: str) -> str:
        made = self.api("POST", f"/users/{self.forge.admin}/tokens",
                        {"name": name, "scopes": list(scopes)})  # fmt: skip
        return str(made["sha1"])

    def repository(self, name: str, files: dict[str, str], branch: str = "main") -> str:
        """A new repository ``name`` whose ``branch`` holds ``files`` in one commit; its
        clone URL."""
        self.api("POST", "/user/repos", {"name": name, "default_branch": branch})
        url = f"{self.forge.url}/{self.forge.admin}/{name}.git"
        with tempfile.TemporaryDirectory() as work:
            self.git("init", "-q", "-b", branch, cwd=work)
            self._commit(work, files, "the base", url, branch)
        return url

    def push(self, name: str, files: dict[str, str], branch: str = "main") -> str:
        """A commit on ``branch`` of repository ``name`` that writes ``files``; its hash."""
        url = f"{self.forge.url}/{self.forge.admin}/{name}.git"
        with tempfile.TemporaryDirectory() as work:
            self.git("clone", "-q", "-b", branch, url, ".", cwd=work)
            return self._commit(work, files, "a change", url, branch)

    def _commit(self, work: str, files: dict[str, str], message: str, url: str, branch: str) -> str:
        """Write ``files`` in the clone ``work``, commit them and push to ``branch``; the
        commit's hash."""
        for path, content in files.items():
            (Path(work) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(work) / path).write_text(content)
        self.git("add", ".", cwd=work)
        self.git("-c", "user.name=Tests", "-c", "user.email=t@forge.invalid", "commit",
                 "-q", "-m", message, cwd=work)  # fmt: skip
        self.git("push", "-q", url, f"HEAD:refs/heads/{branch}", cwd=work)
        return self.git("rev-parse", "HEAD", cwd=work).strip()

    def head(self, name: str, branch: str = "main") -> str:
        """The commit ``branch`` of repository ``name`` is at, as git reads it (the branch list
        of the API is brought up to date after a push, not with it)."""
        url = f"{self.forge.url}/{self.forge.admin}/{name}.git"
        listed = self.git("ls-remote", url, f"refs/heads/{branch}", cwd=tempfile.gettempdir())
        return listed.split("\t", 1)[0]

    def git(self, *args: str, cwd: str | Path) -> str:
        pair = f"{self.forge.admin}:{self.forge.password}".encode()
        header = "Authorization: Basic " + base64.b64encode(pair).decode()
        done = subprocess.run(["git", "-c", f"http.extraHeader={header}", *args], cwd=cwd,
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout

    def branches(self, repo: str) -> dict[str, str]:
        listed = self.api("GET", f"/repos/{self.forge.admin}/{repo}/branches") or []
        return {b["name"]: b["commit"]["id"] for b in listed}

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        return list(self.api("GET", f"/repos/{self.forge.admin}/{repo}/pulls?state=all") or [])

    def changes(self, repo: str, base: str, branch: str) -> dict[str, str | None]:
        """What ``branch`` changes against ``base``: each path and what it holds now (None:
        deleted)."""
        url = f"{self.forge.url}/{self.forge.admin}/{repo}.git"
        with tempfile.TemporaryDirectory() as work:
            self.git("clone", "-q", "--no-single-branch", url, ".", cwd=work)
            compared = f"origin/{base}...origin/{branch}"
            listed = self.git("diff", "--name-status", "--no-renames", compared, cwd=work)
            changed: dict[str, str | None] = {}
            for line in listed.splitlines():
                status, path = line.split("\t", 1)
                changed[path] = None if status == "D" else self.git(
                    "show", f"origin/{branch}:{path}", cwd=work)  # fmt: skip
            return changed
