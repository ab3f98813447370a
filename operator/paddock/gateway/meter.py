"""A run's spending at this gateway process: each request is checked against the run's budget
before it is forwarded (at a ceiling it is refused, and counted as refused), each response's
usage is added once it has passed, and the totals are told to the operator as the run's
usage Event of this process (``render.model_usage``), by a thread of its own: as soon as an
answer has been counted (the answers that end together are told together), and within a
``period`` of a request counted. A request refused at a ceiling is told before the refusal is
answered, so that the operator hears of it before the harness does.

With several gateway replicas, each checks a request against the larger of the totals it
counted itself and those the run's status says (the operator's sum of every replica's Event,
``known``): a run can go past a ceiling by what the other replicas forwarded since the status
was last written, until the operator ends it."""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
from collections.abc import Callable

from paddock.gateway.usage import Usage
from paddock.kube import client as kube
from paddock.kube.errors import KubeError, NotFoundError
from paddock.policy import budgets
from paddock.policy.budgets import Spent
from paddock.render.model_routes import Route
from paddock.render.model_usage import event_name, usage_event, usage_patch
from paddock.times import utcnow

PERIOD_SECONDS = 1.0
KEPT_GONE = 10_000  # forgotten runs remembered, so that a late answer adds nothing back
NOTHING = Spent()
Publish = Callable[[Route, Spent, str], None]


def replica_name() -> str:
    """This process, among the gateway's replicas and their restarts."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


def publish_usage(route: Route, spent: Spent, replica: str) -> None:
    """The run's usage Event of this process, changed (made again if it expired)."""
    namespace, _, run = route.run.partition("/")
    try:
        kube.patch("Event", namespace, event_name(route.uid, replica), usage_patch(spent, utcnow()))
    except NotFoundError:
        kube.create(usage_event(namespace, run, route.uid, replica, spent, utcnow()))


class Meter:
    def __init__(
        self,
        publish: Publish = publish_usage,
        replica: str | None = None,
        period: float = PERIOD_SECONDS,
        known: Callable[[str], Spent] = lambda _: Spent(),
    ) -> None:
        self.replica = replica or replica_name()
        self._publish = publish
        self._known = known
        self._period = period
        self._lock = threading.Condition()
        self._spent: dict[str, Spent] = {}  # run uid -> its totals here
        self._routes: dict[str, Route] = {}
        self._told: dict[str, Spent] = {}  # what the run's Event says
        self._flying: dict[str, Spent] = {}  # run uid -> what its requests in flight hold
        self._gone: dict[str, None] = {}  # the runs forgotten, oldest first
        self._urgent = False
        threading.Thread(target=self._tell_all, daemon=True, name="usage").start()

    def admit(self, route: Route, own: Spent = NOTHING) -> budgets.Admission:
        """A request holding ``own`` (the most it can use) against the run's budget: admitted
        (counted, and ``own`` held in flight until ``landed``), refused at a ceiling (counted
        as refused), or told to wait for the requests in flight (nothing counted)."""
        known = self._known(route.uid)
        with self._lock:
            if route.uid in self._gone:
                return budgets.Admission(refused="the run's route is gone")
            spent = self._spent.get(route.uid, Spent())
            flying = self._flying.get(route.uid, Spent())
            verdict = budgets.admission(route.budget, spent.at_least(known), flying, own)
            if verdict.waits:
                return verdict
            if verdict.refused:
                self._changed(route, spent + Spent(refused=1), urgent=False)
            else:
                self._flying[route.uid] = flying + own + Spent(model_requests=1)
                self._changed(route, spent + Spent(model_requests=1), urgent=False)
        return verdict

    def landed(self, route: Route, own: Spent = NOTHING) -> None:
        """An admitted request is over (answered, failed, or left by its client): what it
        held in flight is given back."""
        with self._lock:
            left = self._flying.get(route.uid, Spent()) - (own + Spent(model_requests=1))
            if left.model_requests:
                self._flying[route.uid] = left
            else:
                self._flying.pop(route.uid, None)

    def refuse(self, route: Route, counted: Spent) -> None:
        """A request refused before it reached the budget (counted: ``refused`` and why)."""
        with self._lock:
            self._changed(route, self._spent.get(route.uid, Spent()) + counted, urgent=False)

    def streaming(self, route: Route, grown: Spent) -> None:
        """Tokens (and their cost) of an answer still streaming, counted as they pass and told
        within the period: a gateway stopped mid-answer has told all but the last period's."""
        with self._lock:
            self._changed(route, self._spent.get(route.uid, Spent()) + grown, urgent=False)

    def used(
        self,
        route: Route,
        usage: Usage,
        cost: float | None,
        uncounted: bool = False,
        streamed: Spent = NOTHING,
    ) -> None:
        """A response's usage, once it has passed (or its client left), less what
        ``streaming`` counted of it already (``streamed``); ``uncounted``: an answer whose
        whole usage could not be read."""
        whole = Spent(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost or 0.0,
            unpriced=1 if cost is None and usage.tokens else 0,
            uncounted=1 if uncounted else 0,
        )
        with self._lock:
            spent = self._spent.get(route.uid, Spent()) + (whole - streamed)
            self._changed(route, spent, urgent=True)

    def spent(self, uid: str) -> Spent:
        with self._lock:
            return self._spent.get(uid, Spent())

    def tell(self, uid: str) -> None:
        """Tell the run's totals now (a refusal waits on it: the operator hears first)."""
        with self._lock:
            route, spent = self._routes.get(uid), self._spent.get(uid)
        if route is not None and spent is not None:
            self._told_now(route, spent)

    def forget(self, uid: str) -> None:
        """The run's route is gone: what is left untold is told, and the run forgotten."""
        self.tell(uid)
        with self._lock:
            for kept in (self._spent, self._routes, self._told, self._flying):
                kept.pop(uid, None)
            self._gone[uid] = None  # (what its requests still in flight use is not kept)
            while len(self._gone) > KEPT_GONE:
                del self._gone[next(iter(self._gone))]

    def _changed(self, route: Route, spent: Spent, urgent: bool) -> None:
        if route.uid in self._gone:
            return
        self._spent[route.uid] = spent
        self._routes[route.uid] = route
        if urgent:
            self._urgent = True
            self._lock.notify()

    def _tell_all(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._urgent, timeout=self._period)
                self._urgent = False
                due = [
                    (self._routes[uid], spent)
                    for uid, spent in self._spent.items()
                    if self._told.get(uid) != spent
                ]
            for route, spent in due:
                self._told_now(route, spent)

    def _told_now(self, route: Route, spent: Spent) -> None:
        with self._lock:
            if self._told.get(route.uid) == spent:
                return
        try:
            self._publish(route, spent, self.replica)
        except KubeError as exc:  # told with the next change, or the next period
            print(f"paddock gateway: the usage of {route.run}: {exc}", file=sys.stderr)
            return
        with self._lock:
            if self._spent.get(route.uid) is not None:
                self._told[route.uid] = spent
