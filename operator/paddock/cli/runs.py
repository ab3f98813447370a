"""``paddock run``, ``paddock exec``, ``paddock cancel``, ``paddock pause`` and ``paddock resume``:
runs and sandboxes from a terminal, with the caller's own kubeconfig identity (what it may do
is what RBAC lets it do).

``exec`` is a ``command`` AgentRun in the sandbox: the operator checks the command against the
sandbox's SandboxPolicy before anything runs (a denied command never starts), runs it, and
logs its output; ``exec`` prints that output as it comes and exits with the command's exit
code. The run is deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import Any

from paddock.api.agentrun import Harness
from paddock.client.access import Caller
from paddock.client.runs import (
    EXIT_CANCELLED,
    EXIT_NOT_RUN,
    TERMINAL,
    Delivering,
    LogUnreadableError,
    exit_code,
    run_manifest,
)
from paddock.runs import events as ev
from paddock.runs import reader

Obj = dict[str, Any]
EXIT_CLIENT = 2  # the command could not do what was asked (bad arguments, a refusal)
ME = Caller(None)  # the kubeconfig's identity: the API server decides what it may do


def add_runs(commands: Any) -> None:
    _add_run(commands)
    _add_exec(commands)
    _add_cancel_pause_resume(commands)


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="start an AgentRun and follow its events",
        description="Create an AgentRun in a Sandbox (--sandbox) or in a fresh sandbox of a "
        "Workspace (--workspace), then print its events until it ends (not with --detach). "
        "Exits 0 when the run succeeded, 1 otherwise.",
        epilog="example: paddock run --workspace app --harness claude-code --prompt 'fix the "
        "failing test'\n         echo 'add a README' | paddock run --sandbox box --harness "
        "codex --prompt -",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--workspace", help="a Workspace: the run gets a fresh sandbox of it")
    where.add_argument("--sandbox", help="an existing Sandbox to run in")
    run.add_argument(
        "--harness", required=True, choices=[str(h) for h in Harness], help="the agent CLI"
    )
    run.add_argument("--prompt", help="the task; - reads it from stdin")
    run.add_argument("--command", help="the shell command, for --harness command")
    run.add_argument("--model", help="model name passed to the harness")
    run.add_argument("--timeout", help="longest the run may take, e.g. 30m (default 1h)")
    run.add_argument("-d", "--detach", action="store_true", help="print the run's name and return")
    run.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    _add_deliver(run)
    run.set_defaults(func=_run)


def _add_deliver(run: Any) -> None:
    deliver = run.add_argument_group(
        "delivery", "push the run's work to a new branch (spec.deliver); the operator pushes, "
        "with a token the sandbox never sees",
    )  # fmt: skip
    deliver.add_argument(
        "--deliver",
        metavar="SECRET[:KEY]",
        help="the Secret (key, default token) of a forge token that may push",
    )
    deliver.add_argument("--branch", help="the new branch; {run}, {thread}, {id} are filled "
                         "in (default paddock/{run})")  # fmt: skip
    deliver.add_argument("--pull-request", action="store_true", help="open a pull request")
    deliver.add_argument("--base", help="the pull request's base branch (default: the "
                         "Workspace's ref, else the default branch)")  # fmt: skip
    deliver.add_argument("--title", help="the pull request's title (default: the commit's)")
    deliver.add_argument("--draft", action="store_true", help="open the pull request as a draft")
    deliver.add_argument(
        "--forge",
        choices=["github", "gitlab", "gitea"],
        help="the forge (default: told from the repository's host)",
    )
    deliver.add_argument(
        "--deliver-always",
        action="store_true",
        help="deliver whatever the run left, however it ended",
    )


def _delivering(args: argparse.Namespace) -> Delivering | None:
    """The delivery the options ask for; ValueError when they are given without --deliver."""
    given = [args.branch, args.pull_request, args.base, args.title, args.draft, args.forge,
             args.deliver_always]  # fmt: skip
    if args.deliver is None:
        if any(given):
            raise ValueError("--branch, --pull-request, --base, --title, --draft, --forge and "
                             "--deliver-always go with --deliver SECRET")  # fmt: skip
        return None
    return Delivering(args.deliver, args.branch, args.pull_request, args.base, args.title,
                      args.draft, args.forge, args.deliver_always)  # fmt: skip


def _add_exec(commands: Any) -> None:
    execute = commands.add_parser(
        "exec",
        help="run a command in a sandbox, checked by its SandboxPolicy",
        description="Run CMD in the sandbox as a command AgentRun: the operator checks it "
        "against the sandbox's SandboxPolicy first (a denied command never runs), then its "
        "output is printed as it comes, and paddock exits with its exit code (126: it did not "
        "run, 124: timed out, 130: cancelled).",
        epilog="example: paddock exec box -n team -- make test",
    )
    execute.add_argument("sandbox", help="name of the Sandbox")
    execute.add_argument("argv", nargs="*", metavar="CMD", help="the command, after --")
    execute.add_argument("-n", "--namespace", help="its namespace (default: the context's)")
    execute.add_argument("--timeout", help="longest the command may take (default 1h)")
    execute.add_argument("--keep", action="store_true", help="keep the AgentRun afterwards")
    execute.set_defaults(func=_exec)


def _add_cancel_pause_resume(commands: Any) -> None:
    cancel = commands.add_parser(
        "cancel",
        help="stop an AgentRun",
        description="Set spec.cancel on the run: its processes are killed, it ends Cancelled.",
        epilog="example: paddock cancel fix-bug -n team",
    )
    cancel.add_argument("run", help="name of the AgentRun")
    cancel.add_argument("-n", "--namespace", help="its namespace (default: the context's)")
    cancel.set_defaults(func=_cancel)
    for name, paused in (("pause", True), ("resume", False)):
        verb = "pause" if paused else "resume"
        command = commands.add_parser(
            name,
            help=f"{verb} a Sandbox",
            description=f"Set spec.lifecycle.paused to {str(paused).lower()}: "
            + (
                "the pod is deleted, the workspace volume kept."
                if paused
                else "the pod is made again on the same volume, without setup."
            ),
            epilog=f"example: paddock {name} box -n team",
        )
        command.add_argument("sandbox", help="name of the Sandbox")
        command.add_argument("-n", "--namespace", help="its namespace (default: the context's)")
        command.set_defaults(func=_pause, paused=paused)


def _namespace(args: argparse.Namespace) -> str:
    from paddock.kube import client as kube

    kube.load_config()
    return str(args.namespace or kube.current_namespace())


def _create(namespace: str, manifest: Obj) -> str | None:
    from paddock.client import runs
    from paddock.kube.errors import KubeError

    try:
        made = runs.create_run(ME, namespace, manifest)
    except KubeError as exc:
        print(f"paddock: the API server refused the AgentRun: {exc.message}", file=sys.stderr)
        return None
    return str(made["metadata"]["name"])


def _events(namespace: str, name: str) -> Iterator[Obj]:
    from paddock.client import runs

    return runs.events(ME, namespace, name, follow=True)


def _run(args: argparse.Namespace) -> int:
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    is_command = args.harness == Harness.COMMAND
    if is_command != (args.command is not None) or (not is_command and not prompt):
        said = "--command goes with --harness command, --prompt with the others"
        print(f"paddock run: {said}", file=sys.stderr)
        return EXIT_CLIENT
    try:
        deliver = _delivering(args)
    except ValueError as exc:
        print(f"paddock run: {exc}", file=sys.stderr)
        return EXIT_CLIENT
    namespace = _namespace(args)
    manifest = run_manifest(
        harness=args.harness,
        prompt=None if is_command else prompt,
        command=args.command,
        sandbox=args.sandbox,
        workspace=args.workspace,
        model=args.model,
        timeout=args.timeout,
        deliver=deliver,
    )
    name = _create(namespace, manifest)
    if name is None:
        return EXIT_CLIENT
    print(f"agentrun/{name} created", file=sys.stderr if not args.detach else sys.stdout)
    if args.detach:
        return 0
    ending = None
    try:
        for event in _events(namespace, name):
            print(reader.as_text(event), flush=True)
            ending = event if event["type"] in TERMINAL else ending
    except KeyboardInterrupt:
        print(f"paddock: still running; paddock cancel {name} stops it", file=sys.stderr)
        return EXIT_CANCELLED
    except LogUnreadableError as exc:
        print(f"paddock run: agentrun/{name} runs on, but its log cannot be read: {exc}",
              file=sys.stderr)  # fmt: skip
        return EXIT_CLIENT
    return 0 if ending is not None and ending["type"] == ev.RUN_COMPLETED else 1


def _exec(args: argparse.Namespace) -> int:
    from paddock.client import runs

    argv = args.argv
    if not argv:
        print("paddock exec: no command: paddock exec SANDBOX -- CMD ...", file=sys.stderr)
        return EXIT_CLIENT
    namespace = _namespace(args)
    if not _exists(namespace, args.sandbox):
        return EXIT_CLIENT
    command = argv[0] if len(argv) == 1 else shlex.join(argv)
    manifest = run_manifest(
        harness=Harness.COMMAND,
        command=command,
        sandbox=args.sandbox,
        timeout=args.timeout,
        prefix="exec-",
    )
    name = _create(namespace, manifest)
    if name is None:
        return EXIT_CLIENT
    ending = None
    try:
        for event in _events(namespace, name):
            if event["type"] == ev.OUTPUT:
                print((event.get("data") or {}).get("text", ""), flush=True)
            elif event["type"] == ev.APPROVAL_REQUESTED:
                print(_asked(namespace, name, event), file=sys.stderr, flush=True)
            elif event["type"] in TERMINAL:
                ending = event
    except KeyboardInterrupt:
        _done(lambda: runs.cancel_run(ME, namespace, name), f"cancel AgentRun {name}")
        return EXIT_CANCELLED
    except LogUnreadableError as exc:
        print(f"paddock exec: the command's output cannot be read: {exc}", file=sys.stderr)
        return EXIT_CLIENT
    finally:
        if not args.keep:
            _delete_run(namespace, name)
    data = (ending or {}).get("data") or {}
    if data.get("stderrTail"):
        print(data["stderrTail"], file=sys.stderr)
    code = exit_code(ending)
    if code == EXIT_NOT_RUN or ending is None:
        said = data.get("message") or f"AgentRun {name} ended without an outcome"
        print(f"paddock exec: {said}", file=sys.stderr)
    return code


def _asked(namespace: str, run: str, requested: Obj) -> str:
    """What ``exec`` says while its command waits for a person's approval."""
    request = (requested.get("data") or {}).get("id")
    return (
        f"paddock exec: the SandboxPolicy says to ask before this command runs; waiting "
        f"(approve it: paddock approve {run} {request} -n {namespace}; or deny it: "
        f"paddock deny {run} {request} -n {namespace})"
    )


def _exists(namespace: str, sandbox: str) -> bool:
    from paddock.client import sandboxes

    return _done(lambda: sandboxes.get_sandbox(ME, namespace, sandbox), f"read Sandbox {sandbox}")


def _delete_run(namespace: str, name: str) -> None:
    from paddock.client import runs
    from paddock.kube.errors import KubeError

    try:
        runs.delete_run(ME, namespace, name)
    except KubeError as exc:
        print(f"paddock: AgentRun {name} is left: {exc.message}", file=sys.stderr)


def _done(action: Callable[[], object], what: str) -> bool:
    """Do ``action`` for the command's user, saying why it could not be done."""
    from paddock.client.access import RefusedError
    from paddock.kube.errors import KubeError

    try:
        action()
    except RefusedError as exc:
        print(f"paddock: {exc}", file=sys.stderr)
        return False
    except KubeError as exc:
        print(f"paddock: cannot {what}: {exc.message}", file=sys.stderr)
        return False
    return True


def _cancel(args: argparse.Namespace) -> int:
    from paddock.client import runs

    namespace = _namespace(args)
    done = _done(lambda: runs.cancel_run(ME, namespace, args.run), f"cancel AgentRun {args.run}")
    if done:
        print(f"agentrun/{args.run} cancelled")
    return 0 if done else 1


def _pause(args: argparse.Namespace) -> int:
    from paddock.client import sandboxes

    namespace, name, paused = _namespace(args), args.sandbox, args.paused
    done = _done(
        lambda: sandboxes.set_paused(ME, namespace, name, paused), f"change Sandbox {name}"
    )
    if done:
        print(f"sandbox/{args.sandbox} {'paused' if args.paused else 'resumed'}")
    return 0 if done else 1
