"""``paddock approve`` and ``paddock deny``: decide a run's pending approval requests.

A decision is the annotation ``approval.paddock.dev/<id>`` on the AgentRun (``approve``,
``approve-always`` or ``deny``, then ``:`` and the digest of the request's whole text), which
the operator reads while the run waits; setting it takes the right to patch agentruns. Each
request's whole text is printed first, invisible and bidirectional characters shown as code
points, and at a terminal an approval waits for a yes (``--yes``: none asked); the decision
names the digest of what was printed. ``--digest`` binds it to text seen before instead (the
approval.requested event's digest), and refuses it if the request holds other text. Exit
codes: 0 decided, 1 nothing decided (no such pending request, none pending, several and none
named, other text than the digest's, or no yes), 2 the run cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from paddock.api.approvals import APPROVAL_ANNOTATION, ApprovalChoice, digest_of, visible

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
        parser.add_argument(
            "-y", "--yes", action="store_true", help="at a terminal, decide without asking"
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
        if args.digest and len(args.ids) != 1:
            raise RefusedError("--digest names the text of one request: name its id")
        shown = dict.fromkeys(args.ids, args.digest) if args.digest else None
        if shown is None:
            shown = _shown(approvals.pending(Caller(None), namespace, args.run, args.ids,
                                             every=args.all), args.run)  # fmt: skip
            if not _confirmed(choice, args):
                print("paddock: nothing was decided", file=sys.stderr)
                return EXIT_NOTHING
        decided = approvals.decide(Caller(None), namespace, args.run, list(shown), choice,
                                   shown=shown)  # fmt: skip
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
        print(f"{choice}: request {rid} of {args.run} ({decided['digests'][rid]})")
    return EXIT_DECIDED


def _shown(texts: dict[str, str], run: str) -> dict[str, str]:
    """Print each request's whole text as every face shows it; the digests of what was shown."""
    for rid, text in texts.items():
        print(f"request {rid} of {run} ({digest_of(text)}):")
        print(visible(text))
    return {rid: digest_of(text) for rid, text in texts.items()}


def _confirmed(choice: ApprovalChoice, args: argparse.Namespace) -> bool:
    """A person at a terminal approves what was printed only on saying yes (--yes: already
    said); a script, or a denial, goes on."""
    if choice == ApprovalChoice.DENY or args.yes or not sys.stdin.isatty():
        return True
    try:
        return input(f"{choice}? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False
