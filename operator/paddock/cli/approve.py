"""``paddock approve`` and ``paddock deny``: decide a run's pending approval requests.

A decision is the annotation ``approval.paddock.dev/<id>`` on the AgentRun (``approve``,
``approve-always`` or ``deny``), which the operator reads while the run waits; setting it
takes the right to patch agentruns. Exit codes: 0 decided, 1 nothing to decide (no such
pending request, none pending, or several and none named), 2 the run cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from paddock.api.approvals import APPROVAL_ANNOTATION, ApprovalChoice

EXIT_DECIDED, EXIT_NOTHING, EXIT_UNREADABLE = 0, 1, 2


def add_approvals(commands: Any) -> None:
    for name, verb in (("approve", "approve"), ("deny", "deny")):
        parser = commands.add_parser(
            name,
            help=f"{verb} an AgentRun's pending approval requests",
            description=f"{verb.capitalize()} the request IDs named, every pending one "
            "(--all), or the only one pending. Recorded as the annotation "
            f"{APPROVAL_ANNOTATION}<id> on the run.",
            epilog=f"example: paddock {name} fix-bug 3 -n team",
        )
        parser.add_argument("run", help="name of the AgentRun")
        parser.add_argument("ids", nargs="*", metavar="ID", help="request ids (status.approvals)")
        parser.add_argument("-n", "--namespace", help="its namespace (default: the context's)")
        parser.add_argument("--all", action="store_true", help="every pending request")
        if name == "approve":
            parser.add_argument(
                "--always",
                action="store_true",
                help="also approve, for the rest of the run, later requests of the same rules",
            )
        parser.set_defaults(func=decide, deny=name == "deny")


def decide(args: argparse.Namespace) -> int:
    from paddock.client import approvals
    from paddock.client.access import Caller, MissingError, RefusedError
    from paddock.kube import client as kube
    from paddock.kube.errors import KubeError

    choice = ApprovalChoice.DENY if args.deny else ApprovalChoice.APPROVE
    if not args.deny and args.always:
        choice = ApprovalChoice.ALWAYS
    try:
        kube.load_config()
        namespace = args.namespace or kube.current_namespace()
        decided = approvals.decide(Caller(None), namespace, args.run, args.ids, choice,
                                   every=args.all)  # fmt: skip
    except MissingError as exc:
        print(f"paddock: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except RefusedError as exc:
        print(f"paddock: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except KubeError as exc:
        print(f"paddock: cannot decide for AgentRun {args.run}: {exc.message}", file=sys.stderr)
        return EXIT_UNREADABLE
    for rid in decided["decided"]:
        print(f"{choice}: request {rid} of {args.run}: {decided['targets'].get(rid, '')}")
    return EXIT_DECIDED
