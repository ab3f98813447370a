"""Pure facts about a delivery's repository: which forge serves it and where its API is, which
paths are CI definitions, and what a git bundle needs before it can be read."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from paddock.api.delivery import Forge
from paddock.forge.errors import DeliveryError

# The forges' CI definitions: a delivery that changes one is refused unless the policy allows it
# (deliver.allowWorkflowChanges). A directory ends with "/"; the directory itself (made a
# symbolic link, say) counts too, and case is ignored.
WORKFLOW_PATHS = (
    ".github/workflows/",
    ".github/actions/",
    ".gitea/workflows/",
    ".gitea/actions/",
    ".forgejo/workflows/",
    ".forgejo/actions/",
    ".gitlab-ci.yml",
    ".gitlab/ci/",
)
MAX_PREREQUISITES = 100

# The user name a forge expects beside an access token in HTTP basic authentication.
TOKEN_USER = {Forge.GITHUB: "x-access-token", Forge.GITLAB: "oauth2", Forge.GITEA: "x-access-token"}


@dataclass(frozen=True)
class Repository:
    url: str  # what git fetches from and pushes to
    forge: Forge
    web: str  # scheme://host[:port]
    path: str  # owner/name (on GitLab, group/.../name)

    @property
    def api(self) -> str:
        if self.forge == Forge.GITHUB:
            host = urlsplit(self.web).hostname
            return "https://api.github.com" if host == "github.com" else f"{self.web}/api/v3"
        if self.forge == Forge.GITLAB:
            return f"{self.web}/api/v4"
        return f"{self.web}/api/v1"


def infer_forge(host: str) -> Forge | None:
    host = host.lower()
    if host == "github.com" or host.endswith(".github.com"):
        return Forge.GITHUB
    if "gitlab" in host:
        return Forge.GITLAB
    if "gitea" in host or "forgejo" in host or host == "codeberg.org":
        return Forge.GITEA
    return None


def repository(url: str, forge: Forge | None) -> Repository:
    """The repository a Workspace's git source names, for delivery: https:// (or http://)
    only, since the push authenticates with a token over HTTP."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise DeliveryError(
            f"the Workspace's repository {url} is not an https:// URL: a delivery pushes over "
            "HTTPS with the token of deliver.credentialsSecret"
        )
    path = parts.path.strip("/").removesuffix(".git")
    if path.count("/") < 1:
        raise DeliveryError(f"{url} names no owner/repository")
    chosen = forge or infer_forge(parts.hostname)
    if chosen is None:
        raise DeliveryError(
            f"which forge serves {parts.hostname} cannot be told from its name: set "
            "spec.deliver.forge (github, gitlab or gitea)"
        )
    if chosen != Forge.GITLAB:
        path = "/".join(path.split("/")[-2:])
    web = f"{parts.scheme}://{parts.netloc}"
    return Repository(url, Forge(chosen), web, path)


def basic_auth(forge: Forge, token: str) -> str:
    """The Authorization header git sends with a token (never in the URL, argv or a log)."""
    pair = f"{TOKEN_USER[forge]}:{token}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def workflow_changes(paths: list[str]) -> list[str]:
    def is_workflow(path: str) -> bool:
        path = path.lower()
        return any(path in (w, w.rstrip("/")) or (w.endswith("/") and path.startswith(w))
                   for w in WORKFLOW_PATHS)  # fmt: skip

    return [path for path in paths if is_workflow(path)]


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def prerequisites(header: bytes) -> list[str]:
    """The commits a git bundle (v2 or v3) needs its reader to have: its header's ``-`` lines."""
    lines = header.split(b"\n")
    if not lines or lines[0] not in (b"# v2 git bundle", b"# v3 git bundle"):
        raise DeliveryError("the sandbox did not hand over a git bundle")
    needed = []
    for line in lines[1:]:
        if not line:
            break
        if line.startswith(b"-"):
            sha = line[1:].split(b" ", 1)[0].decode(errors="replace")
            if not _SHA.fullmatch(sha):
                raise DeliveryError("the sandbox's git bundle has a malformed header")
            needed.append(sha)
    if len(needed) > MAX_PREREQUISITES:
        raise DeliveryError(
            f"the sandbox's git bundle starts from {len(needed)} commits (at most "
            f"{MAX_PREREQUISITES}): its work does not start from one branch"
        )
    return needed


def branch_name(template: str, run: str, thread: str | None, uid: str) -> str:
    return (
        template.replace("{run}", run)
        .replace("{thread}", thread or run)
        .replace("{id}", uid.replace("-", "")[:8])
    )
