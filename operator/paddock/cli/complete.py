"""Completion of the names the commands take (Sandboxes, AgentRuns, Workspaces), in bash and
zsh through argcomplete: ``eval "$(register-python-argcomplete paddock)"`` (and the same for
``kubectl-paddock``). The names are read from the API server with the caller's kubeconfig, in
the namespace of ``-n`` or the context's; nothing is offered where that read fails."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

# Which kind each argument names, by its dest.
NAMED = {
    "sandbox": "Sandbox",
    "run": "AgentRun",
    "workspace": "Workspace",
    "policy": "SandboxPolicy",
}


def names_of(kind: str) -> Callable[..., list[str]]:
    def complete(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
        from paddock.kube import client as kube
        from paddock.kube.errors import KubeError

        try:
            kube.load_config()
            namespace = getattr(parsed_args, "namespace", None) or kube.current_namespace()
            names = [str(obj["metadata"]["name"]) for obj in kube.listed(kind, namespace)]
            return [name for name in names if name.startswith(prefix)]
        except (KubeError, OSError, ValueError):
            return []

    return complete


def add_completers(parser: argparse.ArgumentParser) -> None:
    """Give every argument of NAMED, in every subcommand, its completer."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_completers(sub)
        elif action.dest in NAMED:
            action.completer = names_of(NAMED[action.dest])  # type: ignore[attr-defined]


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request, if this is one (then the process exits)."""
    import argcomplete

    add_completers(parser)
    argcomplete.autocomplete(parser)
