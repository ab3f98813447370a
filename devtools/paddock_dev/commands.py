"""The local cluster's commands, which this distribution adds to ``paddock`` (entry points
``paddock.commands``): ``paddock cluster`` (a control plane, kwok's simulated node and, where
this machine can run one, a real node; the chart's images; Flux) and ``paddock dev`` (the main
job: the cluster, the CRDs, the examples and the operator)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

Commands = argparse._SubParsersAction  # the type add_subparsers() returns


def add_commands(commands: Commands[argparse.ArgumentParser]) -> None:
    _add_cluster(commands)
    _add_dev(commands)


def _cluster(args: argparse.Namespace) -> int:
    from paddock_dev import cluster, images  # (loaded when the command runs: a second)

    directory = Path(args.dir) if args.dir else cluster.default_state_dir()
    if args.action == "up":
        try:
            kubeconfig = cluster.up(directory, real_node=args.real_node)
        except cluster.ClusterError as exc:
            print(f"cluster up failed: {exc}", file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={kubeconfig}")
        return 0
    if args.action == "down":
        cluster.down(directory)
        return 0
    if args.action == "images":
        try:
            print(f"HELM_VALUES={cluster.chart_values(directory)}")
        except (cluster.ClusterError, images.ImageError) as exc:
            print(f"cluster images failed: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.action == "flux":
        try:
            cluster.start_flux(directory)
        except cluster.ClusterError as exc:
            print(f"cluster flux failed: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.action.startswith("load-"):
        try:
            print(cluster.load_image(directory, args.action.removeprefix("load-")))
        except (cluster.ClusterError, images.ImageError) as exc:
            print(f"cluster {args.action} failed: {exc}", file=sys.stderr)
            return 1
        return 0
    report = cluster.status(directory)
    if not report:
        print(f"no local cluster in {directory}")
        return 1
    for component, healthy in report.items():
        print(f"{component:24} {'running' if healthy else 'DOWN'}")
    if all(report.values()):
        print(f"export KUBECONFIG={directory / 'kubeconfig'}")
        return 0
    return 1


def _dev(args: argparse.Namespace) -> int:
    from paddock_dev.dev import run_dev

    return run_dev(operator=not args.no_operator)


def _add_cluster(commands: Commands[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="a local cluster for tests and development (no Docker needed): a control plane, "
        "kwok's simulated node, and a real node where this machine can run one",
        epilog="example: paddock cluster up --no-real-node",
    )
    cluster.add_argument(
        "action",
        choices=[
            "up",
            "down",
            "status",
            "images",
            "load-operator",
            "load-gateway",
            "load-sandbox",
            "flux",
        ],
        help="images: build every image the Helm chart deploys from this checkout, import them "
        "into the real node, and print HELM_VALUES=FILE, values that point the chart at them; "
        "load-operator, load-gateway: build one of them and import it; load-sandbox: likewise "
        "the published sandbox image's content (Node.js and the agent CLIs); flux: start "
        "Flux's source-controller and kustomize-controller on it (built the first time), as "
        "the GitOps tests do",
    )
    cluster.add_argument(
        "--dir", help="state directory (default: $PADDOCK_CLUSTER_DIR or ~/.local/state/...)"
    )
    real_node = cluster.add_mutually_exclusive_group()
    real_node.add_argument(
        "--real-node",
        dest="real_node",
        action="store_const",
        const=True,
        help="require the real node (containerd and a kubelet on this machine); fail without it",
    )
    real_node.add_argument(
        "--no-real-node",
        dest="real_node",
        action="store_const",
        const=False,
        help="kwok's simulated node only",
    )
    cluster.set_defaults(func=_cluster, real_node=None)


def _add_dev(commands: Commands[argparse.ArgumentParser]) -> None:
    dev = commands.add_parser(
        "dev",
        help="the main job: a cluster (the current one, else a local one), the CRDs, the "
        "examples and the operator",
        epilog="example: paddock dev --no-operator",
    )
    dev.add_argument("--no-operator", action="store_true", help="stop after applying the examples")
    dev.set_defaults(func=_dev)
