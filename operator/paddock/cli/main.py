"""The ``paddock`` command line: its parser and its commands that are not about runs,
sandboxes, approvals or policies (each of those has its module here), and those other
distributions add (the local cluster's, in a source checkout: devtools/)."""
# PYTHON_ARGCOMPLETE_OK

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

from paddock import __version__
from paddock.cli.approve import add_approvals
from paddock.cli.complete import autocomplete
from paddock.cli.policy import add_policy
from paddock.cli.runs import add_runs
from paddock.gateway.run import add_gateway
from paddock.kube.errors import NoClusterConfigError


def _crds(args: argparse.Namespace) -> int:
    from paddock.api.crd import stale_crds, write_crds

    directory = Path(args.dir)
    chart = Path(args.chart) if args.chart else None
    if args.check:
        stale = stale_crds(directory, chart)
        if stale:
            print(
                f"CRD files differ from the API models: {', '.join(stale)}. "
                "Run `paddock crds` and commit the result.",
                file=sys.stderr,
            )
            return 1
        print("CRD files match the API models.")
        return 0
    for path in write_crds(directory, chart):
        print(f"wrote {path}")
    return 0


def _operator(args: argparse.Namespace) -> int:
    from paddock.operator_main import run_operator

    return run_operator(
        namespaces=args.namespace,
        liveness=args.liveness,
        priority=args.priority,
        log_format=args.log_format,
        verbose=args.verbose,
    )


def _mcp(args: argparse.Namespace) -> int:
    from paddock.kube.client import current_namespace, load_config
    from paddock.mcpserver import server

    if (args.tls_cert is None) != (args.tls_key is None) or (args.tls_cert and not args.http):
        print("paddock mcp: --tls-cert and --tls-key go together, with --http", file=sys.stderr)
        return 2
    load_config()
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    server.serve(args.namespace or current_namespace(), args.http, tls)
    return 0


def _console(args: argparse.Namespace) -> int:
    from paddock.console.server import serve
    from paddock.kube.client import current_namespace, load_config

    if (args.tls_cert is None) != (args.tls_key is None):
        print("paddock console: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    if args.external_url:
        from paddock.console.guard import origin_of

        try:
            origin_of(args.external_url)
        except ValueError as exc:
            print(f"paddock console: {exc}", file=sys.stderr)
            return 2
    load_config()
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    serve(args.namespace or current_namespace(), args.http, tls, args.external_url)
    return 0


def _logs(args: argparse.Namespace) -> int:
    from paddock.client import logs
    from paddock.kube.client import current_namespace, load_config
    from paddock.runs import reader

    load_config()
    namespace = args.namespace or current_namespace()
    render = reader.as_json if args.output == "json" else reader.as_text
    try:
        for event in logs.events(namespace, args.run, args.from_seq, follow=args.follow):
            print(render(event), flush=True)
    except (logs.RunNotFoundError, logs.ObjectStoreError) as exc:
        print(f"paddock logs: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def build_parser(prog: str = "paddock") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run AI coding agents in sandbox pods on Kubernetes.",
        epilog="example: paddock exec box -- make test",
    )
    parser.add_argument("--version", action="version", version=f"paddock {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_crds,
        _add_operator,
        _add_plugins,
        _add_logs,
        add_runs,
        _add_mcp,
        _add_console,
        _add_policy_and_approvals,
        add_gateway,
    ):
        add(commands)
    return parser


Commands = argparse._SubParsersAction  # the type add_subparsers() returns


def _add_plugins(commands: Commands[argparse.ArgumentParser]) -> None:
    """The commands other installed distributions add (entry points ``paddock.commands``): in
    a source checkout, paddock-dev's ``paddock cluster`` and ``paddock dev``."""
    for plugin in entry_points(group="paddock.commands"):
        try:
            add = plugin.load()
        except Exception as exc:  # one broken distribution must not take every command away
            print(f"paddock: commands of {plugin.value} not loaded: {exc}", file=sys.stderr)
            continue
        add(commands)


def _add_crds(commands: Commands[argparse.ArgumentParser]) -> None:
    crds = commands.add_parser(
        "crds",
        help="write the CRDs generated from the API models",
        epilog="example: paddock crds --check",
    )
    crds.add_argument("--dir", default="crds", help="directory of the CRD files (default: crds)")
    crds.add_argument(
        "--chart",
        default="charts/paddock",
        help="Helm chart whose templates/crds/ get the same CRDs (default: charts/paddock; "
        "empty: none)",
    )
    crds.add_argument(
        "--check", action="store_true", help="exit 1 when the files differ from the models"
    )
    crds.set_defaults(func=_crds)


def _add_operator(commands: Commands[argparse.ArgumentParser]) -> None:
    operator = commands.add_parser(
        "operator", help="run the operator", epilog="example: paddock operator -n team --verbose"
    )
    operator.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable); default: the whole cluster",
    )
    operator.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="liveness endpoint URL (default: %(default)s); empty to disable",
    )
    operator.add_argument(
        "--priority",
        type=int,
        default=None,
        help="take part in kopf peering with this priority (high availability); "
        "default: standalone, one replica",
    )
    operator.add_argument("--log-format", choices=["text", "json"], default="text")
    operator.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    operator.set_defaults(func=_operator)


def _add_logs(commands: Commands[argparse.ArgumentParser]) -> None:
    logs = commands.add_parser(
        "logs",
        help="print an AgentRun's events (replay, and follow)",
        description="Print an AgentRun's events from its log, wherever the run's status says "
        "it is: ConfigMaps, or objects in an S3 bucket (read with your own AWS credentials: "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, and AWS_CA_BUNDLE for a private CA).",
        epilog="example: paddock logs fix-bug -n team --from-seq 40 --follow",
    )
    logs.add_argument("run", help="name of the AgentRun")
    logs.add_argument("-n", "--namespace", help="its namespace (default: the context's)")
    logs.add_argument(
        "--from-seq", type=int, default=0, help="first event to print (default: 0, the start)"
    )
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the run has ended"
    )
    logs.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text, or JSON lines"
    )
    logs.set_defaults(func=_logs)


def _add_mcp(commands: Commands[argparse.ArgumentParser]) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve Paddock's sandboxes and runs as MCP tools (stdio, or HTTP)",
        description="An MCP server. Over stdio (the default), for an agent's MCP config: the "
        "tools act with your kubeconfig's identity. Over streamable HTTP (--http): each caller "
        "presents a Kubernetes bearer token (checked with TokenReview), and each call is "
        "authorised for that identity with SubjectAccessReview.",
        epilog="example: claude mcp add paddock -- paddock mcp -n team",
    )
    mcp.add_argument(
        "-n", "--namespace", help="the tools' default namespace (default: the context's)"
    )
    _add_serving(mcp, "serve streamable HTTP at HOST:PORT/mcp (port 0: any free one, printed)")
    mcp.set_defaults(func=_mcp)


def _add_console(commands: Commands[argparse.ArgumentParser]) -> None:
    console = commands.add_parser(
        "console",
        help="serve the web console: runs live, their timelines, approvals, sandboxes",
        description="The web console. Each person signs in with a Kubernetes bearer token (or "
        "an authenticating proxy in front passes one in Authorization), checked with "
        "TokenReview; each read and decision is authorised for that identity with "
        "SubjectAccessReview.",
        epilog="example: paddock console -n team --http 127.0.0.1:8080",
    )
    console.add_argument(
        "-n", "--namespace", help="the namespace it opens on (default: the context's)"
    )
    _add_serving(
        console,
        "where to serve (default: 127.0.0.1:8080; port 0: any free one, printed)",
        default="127.0.0.1:8080",
    )
    console.add_argument(
        "--external-url",
        metavar="URL",
        help="the address people reach it at (https://console.example.com): the one host "
        "name it answers to besides loopback and IP addresses, and the Origin its forms come "
        "from",
    )
    console.set_defaults(func=_console)


def _add_serving(parser: argparse.ArgumentParser, http: str, default: str | None = None) -> None:
    """--http, --tls-cert and --tls-key, as the MCP server and the console take them."""
    parser.add_argument("--http", metavar="HOST:PORT", default=default, help=http)
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="with --http: serve HTTPS with this PEM certificate"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="with --tls-cert: its PEM private key")


def _add_policy_and_approvals(commands: Commands[argparse.ArgumentParser]) -> None:
    add_policy(commands)
    add_approvals(commands)


def _parsed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments; for ``exec``, every word after the first ``--`` is the command's, as
    it is (argparse would take the sandbox and the command as one run of positionals, before
    options such as ``-n`` that come between them)."""
    if argv[:1] == ["exec"] and "--" in argv:
        cut = argv.index("--")
        args = parser.parse_args(argv[:cut])
        args.argv = [*args.argv, *argv[cut + 1 :]]
        return args
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    # Installed as kubectl-paddock too: `kubectl paddock ...` is how a person calls it then.
    called = Path(sys.argv[0]).name
    parser = build_parser("kubectl paddock" if called.startswith("kubectl-") else "paddock")
    autocomplete(parser)
    args = _parsed(parser, list(sys.argv[1:] if argv is None else argv))
    try:
        code: int = args.func(args)
    except NoClusterConfigError as exc:
        print(f"{parser.prog} {args.command}: {exc.message}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
