"""Pure facts about a delivery's repository: which forge serves it and where its API is, which
paths are CI definitions, and what a git bundle needs before it can be read."""

from __future__ import annotations

import base64
import bisect
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import yaml

from paddock.api.delivery import Forge
from paddock.forge.errors import DeliveryError

# The CI definitions of the forges Paddock knows and of the common CI systems (docs/delivery.md
# lists them): a delivery that changes one is refused unless the policy allows it
# (deliver.allowWorkflowChanges). Each is a place in the repository: the file or directory,
# what is in it, and every directory above it count; case is ignored.
CI_DEFINITIONS = (
    # GitHub Actions (which Gitea and Forgejo read too), and the actions a workflow uses
    ".github/workflows", ".github/actions",
    # Gitea and Forgejo Actions
    ".gitea/workflows", ".gitea/actions", ".forgejo/workflows", ".forgejo/actions",
    # GitLab CI
    ".gitlab-ci.yml", ".gitlab-ci.yaml", ".gitlab/ci",
    # Woodpecker (Codeberg's CI)
    ".woodpecker", ".woodpecker.yml", ".woodpecker.yaml",
    # Drone
    ".drone.yml", ".drone.yaml", ".drone.jsonnet", ".drone.star",
    # CircleCI
    ".circleci",
    # Azure Pipelines
    "azure-pipelines.yml", "azure-pipelines.yaml", ".azure-pipelines", ".azuredevops",
    # Buildkite
    ".buildkite", "buildkite.yml", "buildkite.yaml", "buildkite.json",
    # Jenkins
    "Jenkinsfile",
    # Travis CI
    ".travis.yml", ".travis.yaml",
    # Bitbucket Pipelines
    "bitbucket-pipelines.yml",
    # AppVeyor, Cirrus CI, Semaphore, Tekton (Pipelines as Code)
    "appveyor.yml", ".appveyor.yml", ".cirrus.yml", ".cirrus.star", ".semaphore", ".tekton",
)  # fmt: skip
# A repository whose symbolic links make more places CI definitions than this is refused whole.
MAX_CI_PLACES = 512
MAX_LINK_HOPS = 40  # links followed on one path, as Linux follows at most 40
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


def workflow_changes(
    changed: list[str], links: Mapping[str, str], referenced: Iterable[str] = ()
) -> list[str]:
    """The changed paths that change what a CI system runs at the commit pushed, whose
    symbolic links are ``links`` (path: target). A path changes a CI definition when it is
    one, is in one or is a directory above one (made a link or a submodule, say), where the
    definitions are the CI_DEFINITIONS, the places their files name (``referenced``: local
    actions, GitLab's local includes) and every place the links make one read from. Case is
    ignored (casefolded)."""
    folded = {path.casefold(): target.casefold() for path, target in links.items()}
    places = _ci_places(folded, [p.casefold() for p in referenced])
    if places is None:
        return list(changed)
    return [path for path in changed if any(_touches(path.casefold(), p) for p in places)]


# What a CI definition names to run from the repository itself: a local action or reusable
# workflow (GitHub, Gitea, Forgejo: ``uses: ./DIR``), a local include (GitLab: ``local: PATH``,
# or an include given as a path). Read as YAML (quoting, flow forms, anchors resolved); a key
# read where it is no reference only makes one more place a CI definition (a refusal, never a
# pass).
MAX_REFERENCES = 256
GLOB = re.compile(r"[*?\[]")


def referenced_places(texts: Mapping[str, str]) -> set[str] | None:
    """The places of the repository the CI definitions' files ``texts`` (path: text) name to
    run (a local action's directory, an included file), as paths from the repository's root;
    None when every place counts: a file that is no YAML, a reference to the repository itself
    or a glob, or more than MAX_REFERENCES."""
    found: set[str] = set()
    for path, text in texts.items():
        if not path.casefold().endswith((".yml", ".yaml")):
            continue  # a Jenkinsfile, a Starlark or Jsonnet pipeline: no such references
        try:
            documents = list(yaml.load_all(text, Loader=_Loader))  # a SafeLoader
        except yaml.YAMLError:
            return None
        for named in _named(documents):
            place = posixpath.normpath(named.strip().removeprefix("./").lstrip("/"))
            if place in (".", "") or GLOB.search(place):
                return None  # the whole repository, or what a glob matches: all count
            if place == ".." or place.startswith("../"):
                continue  # outside the repository: not a place of its own
            found |= {place, place.partition("@")[0]}  # (an action's @ref, or a name's @)
    return found if len(found) <= MAX_REFERENCES else None


class _Loader(yaml.SafeLoader):
    """YAML as SafeLoader reads it, with any tag (GitLab's ``!reference [...]``) read as the
    plain node it tags."""


def _plain(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> object:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_multi_constructor("!", _plain)


def _named(node: object, key: str = "") -> Iterator[str]:
    """Each path a YAML node names to run: ``uses`` values beginning ``./``, ``local`` values,
    and ``include`` values given as paths (not URLs)."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _named(value, str(name))
    elif isinstance(node, list):
        for item in node:
            yield from _named(item, key)
    elif isinstance(node, str):
        local = key == "local" or (key == "include" and "://" not in node)
        if local or (key == "uses" and node.strip().startswith("./")):
            yield node


def _touches(path: str, place: str) -> bool:
    if place == "":  # the repository itself: a link made it a CI definition
        return True
    return path == place or path.startswith(place + "/") or place.startswith(path + "/")


def ci_places(links: Mapping[str, str], referenced: Iterable[str]) -> set[str] | None:
    """Every place of the repository a CI system reads from (the CI_DEFINITIONS and the
    ``referenced`` places), links followed, and the links on the way; None: too many."""
    folded = {path.casefold(): target.casefold() for path, target in links.items()}
    return _ci_places(folded, [p.casefold() for p in referenced])


def _ci_places(links: Mapping[str, str], referenced: list[str]) -> set[str] | None:
    """Every place of the repository a CI system reads its definitions from, once the links
    are followed: where each place leads and where each link in a place leads; and the links
    on those ways, whose change changes where they lead (None: more than MAX_CI_PLACES)."""
    inside = sorted(links)
    places: set[str] = set()
    passed: set[str] = set()
    todo = [place.casefold() for place in CI_DEFINITIONS] + referenced
    while todo:
        place = todo.pop()
        if place in places:
            continue
        places.add(place)
        if len(places) + len(passed) > MAX_CI_PLACES:
            return None
        for path in [place, *_links_in(place, inside)]:
            target, through = _resolved(path, links)
            passed.update(through)
            if target is not None:
                todo.append(target)
    return places | passed


def _links_in(place: str, inside: list[str]) -> list[str]:
    """The links under ``place`` (``inside``: every link's path, sorted)."""
    if place == "":
        return inside
    start = bisect.bisect_left(inside, place + "/")
    end = bisect.bisect_left(inside, place + "0")  # "0" sorts right after "/"
    return inside[start:end]


def _resolved(path: str, links: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """Where ``path`` is in the repository once every link on its way (itself included) is
    followed, as the file system would ("" for the repository itself; None when a link leads
    out of it, or links loop), and the links it went through."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    done: list[str] = []
    through: list[str] = []
    while parts:
        part = parts.pop(0)
        if part == "..":
            if not done:
                return None, through
            done.pop()
            continue
        here = "/".join([*done, part])
        target = links.get(here)
        if target is None:
            done.append(part)
            continue
        through.append(here)
        if len(through) > MAX_LINK_HOPS or target.startswith("/"):
            return None, through
        parts = [p for p in target.split("/") if p not in ("", ".")] + parts
    return "/".join(done), through


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
    """The branch a delivery pushes: the template filled in; DeliveryError when git would not
    make it a new branch under refs/heads/."""
    name = (
        template.replace("{run}", run)
        .replace("{thread}", thread or run)
        .replace("{id}", uid.replace("-", "")[:8])
    )
    if (problem := branch_problem(name)) is not None:
        raise DeliveryError(f"the branch to push, {name!r}, {problem}")
    return name


_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def branch_problem(name: str) -> str | None:
    """Why ``name`` is not a new branch under refs/heads/ as git makes one (git's rules for a
    ref name, and ``git branch``'s: not HEAD, not starting with -), nor a name read as another
    ref (refs/...); None when it is one."""
    if name in ("HEAD", "@") or name.startswith(("-", "refs/")):
        return "names another ref, not a new branch"
    if name.endswith((".", "/")) or name.startswith("/") or "//" in name:
        return "is not a git branch name (it starts or ends with / or ends with .)"
    if ".." in name or "@{" in name or _REF_FORBIDDEN.search(name):
        return "is not a git branch name (.., @{, a space, a control character or one of ~^:?*[\\)"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "is not a git branch name (a part starts with . or ends with .lock)"
    return None
