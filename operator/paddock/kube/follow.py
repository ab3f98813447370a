"""Following objects as they change, the one way every follower does it (the console's live
pages, ``paddock logs -f``, the gateway's directory and model routes): a listing, then
a watch from the listing's version, renewed each time the server ends it, and a listing again
when that version has expired (the caller is told it was listed again, so it forgets what the
last listing said).

When the API server goes away (it cannot be reached, or answers 429 or 5xx), the follower
lists again after a pause, 1 s doubling to 30 s, for as long as its ``patience`` lasts
(None: for ever), counted from the first failure in a row; past it, the last error is raised.
Any other refusal (403, 404) is raised at once: a follower whose access was taken away
stops."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from paddock.kube.errors import KubeError
from paddock.kube.watches import WatchExpiredError

Obj = dict[str, Any]
FIRST_PAUSE = 1.0
LONGEST_PAUSE = 30.0
AWAY_STATUSES = frozenset({429, 500, 502, 503, 504})
# How long a person's follower (a live page, ``paddock logs -f``) waits for an API server that
# went away before it says so; the gateway waits for ever.
PERSON_PATIENCE = 60.0


@dataclass(frozen=True)
class Listed:
    """Every object, as a listing says (the first, or one after the watch's version expired)."""

    objects: list[Obj]


@dataclass(frozen=True)
class Changed:
    """One change a watch brought: ADDED, MODIFIED or DELETED."""

    type: str
    object: Obj


def away(exc: BaseException) -> bool:
    """Whether the error says the API server is away (it cannot be reached, or answers 429 or
    5xx), not that it refused or that this process cannot talk to any (no configuration)."""
    if isinstance(exc, KubeError):
        return exc.status in AWAY_STATUSES
    from urllib3.exceptions import HTTPError  # (the client library's transport)

    return isinstance(exc, ConnectionError | TimeoutError | HTTPError)


def follow(
    listing: Callable[[], tuple[list[Obj], str]],
    watching: Callable[[str], Iterator[tuple[str, Obj]]],
    *,
    renewed: Callable[[], bool] | None = None,
    patience: float | None = None,
    waited: Callable[[BaseException, float], None] | None = None,
    since: str = "",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Listed | Changed]:
    """``listing()`` gives the objects and the version to watch from; ``watching(version)``
    each change after it (and the server's bookmarks, which move the version on). Each time a
    watch ends, however it ended, ``renewed()`` says whether to go on (it may raise, to stop
    with a reason). ``waited(error, pause)`` is told each pause while the API server is away.
    ``since``: a version to watch from first, with no listing (the caller read the objects).

    The patience is counted from the first failure since a watch last went well (brought a
    change, or ran until the server ended it): a listing alone does not reset it. A version
    that expires again at once is waited on too, as the server being away is."""
    version, pause, expired = since, FIRST_PAUSE, 0
    failing_since: float | None = None
    first = True
    while True:
        try:
            if not first and renewed is not None and not renewed():
                return
            first = False
            if not version:
                objects, version = listing()
                yield Listed(objects)
            for change, obj in watching(version):
                version = str(obj["metadata"]["resourceVersion"])  # a bookmark's too
                if change != "BOOKMARK":
                    failing_since, pause, expired = None, FIRST_PAUSE, 0
                    yield Changed(change, obj)
            failing_since, pause, expired = None, FIRST_PAUSE, 0
        except WatchExpiredError:
            version, expired = "", expired + 1
            if expired > 1:
                sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE)
        except Exception as exc:
            if not away(exc):
                raise
            now = clock()
            failing_since = now if failing_since is None else failing_since
            if patience is not None and now - failing_since >= patience:
                raise
            if waited is not None:
                waited(exc, pause)
            sleep(pause)
            version, pause = "", min(pause * 2, LONGEST_PAUSE)
