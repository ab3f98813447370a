"""``paddock policy check``: a policy's verdict on commands, before it is rolled out.

Exit codes: 0 allow, 1 deny, 3 ask, 2 a usage error (a missing or invalid policy, no command).
With several commands (``--stdin``), the strictest verdict decides the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from paddock.api.errors import describe
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.workspace import WorkspaceSpec

EXIT_ALLOW, EXIT_DENY, EXIT_USAGE, EXIT_ASK = 0, 1, 2, 3
EXIT_CODES = {Decision.ALLOW: EXIT_ALLOW, Decision.ASK: EXIT_ASK, Decision.DENY: EXIT_DENY}


class UsageError(Exception):
    """What the command was given cannot be used; the message says why."""


def add_policy(commands: Any) -> None:
    policy = commands.add_parser(
        "policy",
        help="test a SandboxPolicy",
        epilog="example: paddock policy check -f policy.yaml -- git push --force",
    )
    actions = policy.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="print a policy's verdict on a command (exit 0 allow, 1 deny, 3 ask, 2 usage)",
        description="The words after -- are joined with spaces and read as one shell "
        "command, as bash -c would. Exit codes: 0 allow, 1 deny, 3 ask, 2 usage error; "
        "with --stdin, the strictest verdict.",
        epilog="example: paddock policy check --policy strict -n team -- rm -rf build",
    )
    source = check.add_mutually_exclusive_group(required=True)
    source.add_argument("-f", "--file", help="a YAML file holding a SandboxPolicy")
    source.add_argument("--policy", help="a SandboxPolicy on the cluster, by name")
    check.add_argument("-n", "--namespace", help="namespace of --policy and --workspace")
    workspace = check.add_mutually_exclusive_group()
    workspace.add_argument(
        "--workspace-file", help="a YAML file holding a Workspace whose scripts are aliases"
    )
    workspace.add_argument(
        "--workspace", help="a Workspace on the cluster whose scripts are aliases"
    )
    check.add_argument("--json", action="store_true", help="print JSON, one object per command")
    check.add_argument(
        "--stdin", action="store_true", help="read commands from stdin, one per line"
    )
    check.add_argument("command", nargs="*", help="the command (after --)")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from paddock.policy.check import problems, warnings
    from paddock.policy.engine import evaluate, strictest

    try:
        policy = _policy(args)
        scripts = _scripts(args)
        commands = _commands(args)
    except UsageError as exc:
        print(f"paddock policy check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for problem in [*problems(policy), *warnings(policy)]:
        print(f"warning: {problem}", file=sys.stderr)
    decisions = []
    for command in commands:
        verdict = evaluate(policy, command, scripts)
        decisions.append(verdict.decision)
        if args.json:
            print(json.dumps({"command": command, **verdict.as_json()}))
            continue
        print(verdict.explain())
        for part in verdict.parts:
            print(f"  {part.decision:5}  {part.kind:10}  {part.text}  ({part.rule})")
    return EXIT_CODES[strictest(decisions)]


def _commands(args: argparse.Namespace) -> list[str]:
    if args.stdin:
        if args.command:
            raise UsageError("give the commands on stdin or after --, not both")
        # Bytes, one command per newline: a byte that is not UTF-8 reaches the engine (which
        # denies it), and no other character ends a line.
        text = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
        commands = [line for line in text.split("\n") if line.strip()]
    else:
        commands = [" ".join(args.command)] if args.command else []
    if not commands:
        raise UsageError("no command to check: give one after --, or lines on stdin with --stdin")
    return commands


def _policy(args: argparse.Namespace) -> SandboxPolicySpec:
    if args.file:
        body = _document(Path(args.file), "SandboxPolicy")
    else:
        body = _from_cluster("SandboxPolicy", args.policy, args.namespace)
    try:
        return SandboxPolicySpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        raise UsageError("the SandboxPolicy is invalid: " + "; ".join(describe(exc))) from None


def _scripts(args: argparse.Namespace) -> dict[str, str]:
    if args.workspace_file:
        body = _document(Path(args.workspace_file), "Workspace")
    elif args.workspace:
        body = _from_cluster("Workspace", args.workspace, args.namespace)
    else:
        return {}
    try:
        return WorkspaceSpec.model_validate(body.get("spec") or {}).scripts
    except ValidationError as exc:
        raise UsageError("the Workspace is invalid: " + "; ".join(describe(exc))) from None


def _document(path: Path, kind: str) -> dict[str, Any]:
    """The first document of that kind in a YAML file."""
    try:
        documents = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == kind:
            return document
    raise UsageError(f"{path} holds no {kind}")


def _from_cluster(kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    from paddock.kube import client as kube
    from paddock.kube.errors import KubeError

    try:
        kube.load_config()
        found = kube.get(kind, namespace or kube.current_namespace(), name)
    except KubeError as exc:
        raise UsageError(f"cannot read {kind} {name}: {exc.message}") from None
    if found is None:
        raise UsageError(f"{kind} {name} not found")
    return found
