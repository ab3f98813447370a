"""``paddock approve`` and ``paddock deny``: decide a run's pending approval requests.

A decision is the annotation ``approval.paddock.dev/<id>`` on the AgentRun (``approve``,
``approve-always`` or ``deny``, then ``:`` and the digest of the request's whole text), which
the operator reads while the run waits; setting it takes the right to patch agentruns. What
was decided is printed whole, with invisible and bidirectional characters shown as code
points; ``--digest`` binds the decision to text seen before (the approval.requested event's
digest), and refuses it if the request holds other text. Exit codes: 0 decided, 1 nothing
to decide (no such pending request, none pending, several and none named, or other text
than the digest's), 2 the run cannot be read.
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
        parser.add_argument(
            "--digest",
            help="the sha256:HEX of the text you saw (one request): refused if it differs",
        )
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
        shown = dict.fromkeys(args.ids, args.digest) if args.digest else None
        if args.digest and len(args.ids) != 1:
            raise RefusedError("--digest names the text of one request: name its id")
        decided = approvals.decide(Caller(None), namespace, args.run, args.ids, choice,
                                   every=args.all, shown=shown)  # fmt: skip
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
        print(f"{choice}: request {rid} of {args.run} ({decided['digests'][rid]}):")
        print(decided["targets"][rid])
    return EXIT_DECIDED
