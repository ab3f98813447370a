"""Opening a pull request (a merge request on GitLab) through the forge's REST API, once: an
open one from the same branch to the same base is found and kept, not opened again."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from paddock.api.delivery import Forge
from paddock.forge.errors import DeliveryError
from paddock.forge.repos import Repository

API_TIMEOUT = 30.0


@dataclass(frozen=True)
class Asked:
    head: str
    base: str
    title: str
    body: str
    draft: bool


@dataclass(frozen=True)
class Opened:
    url: str
    number: int
    already: bool  # it was open before this delivery


class _Api:
    """The forge's API with the token: JSON in and out; its refusals as DeliveryError."""

    def __init__(self, repo: Repository, token: str) -> None:
        self.repo = repo
        self._headers = {"Accept": "application/json", "Content-Type": "application/json",
                         "User-Agent": "paddock"}  # fmt: skip
        # Sent to the forge's API only: never along a redirect to somewhere else.
        self._secret = ("PRIVATE-TOKEN", token) if repo.forge == Forge.GITLAB else (
            "Authorization", f"token {token}")  # fmt: skip

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        if not self.repo.api.startswith(("https://", "http://")):
            raise DeliveryError(f"{self.repo.api} is not an HTTP URL")
        request = urllib.request.Request(  # noqa: S310  (http or https, checked above)
            self.repo.api + path, data=data, method=method, headers=self._headers
        )
        request.add_unredirected_header(*self._secret)
        try:
            with urllib.request.urlopen(request, timeout=API_TIMEOUT) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            said = _message(exc.read())
            raise DeliveryError(
                f"{self.repo.forge} refused {method} {path} ({exc.code}): {said}",
                refused=exc.code < 500,
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DeliveryError(f"{self.repo.api} cannot be reached: {reason}", False) from None


def _message(raw: bytes) -> str:
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace").strip()[:300]
    if isinstance(data, dict):
        return str(data.get("message") or data.get("error") or data)[:300]
    return str(data)[:300]


def open_pull_request(repo: Repository, token: str, asked: Asked) -> Opened:
    api = _Api(repo, token)
    if repo.forge == Forge.GITLAB:
        return _gitlab(api, asked)
    found = _open_one(api, asked)
    if found is not None:
        return found
    title = asked.title
    if asked.draft and repo.forge == Forge.GITEA:
        title = f"WIP: {title}"  # Gitea's drafts are titles that start so
    body: dict[str, Any] = {"head": asked.head, "base": asked.base, "title": title,
                            "body": asked.body}  # fmt: skip
    if asked.draft and repo.forge == Forge.GITHUB:
        body["draft"] = True
    made = api.call("POST", f"/repos/{repo.path}/pulls", body)
    return Opened(str(made.get("html_url") or made["url"]), int(made["number"]), False)


def _open_one(api: _Api, asked: Asked) -> Opened | None:
    path = api.repo.path
    if api.repo.forge == Forge.GITEA:
        try:
            pull = api.call("GET", f"/repos/{path}/pulls/{_q(asked.base)}/{_q(asked.head)}")
        except DeliveryError as exc:
            if "(404)" in exc.message:
                return None
            raise
        pulls = [pull] if pull and pull.get("state") == "open" else []
    else:
        owner = path.split("/", 1)[0]
        query = urllib.parse.urlencode({"head": f"{owner}:{asked.head}", "base": asked.base,
                                        "state": "open"})  # fmt: skip
        pulls = api.call("GET", f"/repos/{path}/pulls?{query}") or []
    if not pulls:
        return None
    return Opened(str(pulls[0].get("html_url") or pulls[0]["url"]), int(pulls[0]["number"]), True)


def _gitlab(api: _Api, asked: Asked) -> Opened:
    project = f"/projects/{_q(api.repo.path)}"
    query = urllib.parse.urlencode({"source_branch": asked.head, "target_branch": asked.base,
                                    "state": "opened"})  # fmt: skip
    found = api.call("GET", f"{project}/merge_requests?{query}") or []
    if found:
        return Opened(str(found[0]["web_url"]), int(found[0]["iid"]), True)
    made = api.call("POST", f"{project}/merge_requests", {
        "source_branch": asked.head, "target_branch": asked.base, "title": asked.title,
        "description": asked.body, "draft": asked.draft,
    })  # fmt: skip
    return Opened(str(made["web_url"]), int(made["iid"]), False)


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")
