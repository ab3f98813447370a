"""A running run is followed by one long-lived stream into its sandbox's sidecar (its follower,
``data/gate/follow.mjs``), not by an exec a second; a stream that breaks is opened again from
the log's cursor, with no line lost or repeated."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from support.kube import Cluster
from support.runs import command_run, log_events, of_type, wait_for_run
from support.sandboxes import ready_sandbox
from support.waiting import wait_for


def _calls(kind: str) -> float:
    return REGISTRY.get_sample_value("paddock_agentrun_pod_calls_total", {"kind": kind}) or 0.0


def _printed(cluster: Cluster, namespace: str, name: str) -> list[str]:
    return [e["summary"] for e in of_type(log_events(cluster, namespace, name), "output")]


def test_a_quiet_running_run_costs_no_exec_and_its_lines_come_at_once(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    # Quiet for 6 s between its lines: polled by exec, that was 6 execs.
    command = "echo one; sleep 6; echo two; sleep 300"
    cluster.apply(command_run("quiet", "box", command), namespace)
    wait_for(lambda: "one" in _printed(cluster, namespace, "quiet"), 60, what="the first line")
    execs, streams = _calls("exec"), _calls("stream")
    wait_for(lambda: "two" in _printed(cluster, namespace, "quiet"), 60, what="the second line")
    assert (_calls("exec") - execs, _calls("stream") - streams) == (0, 0)
    cluster.kubectl("patch", "agentrun", "quiet", "-n", namespace, "--type", "merge",
                    "-p", '{"spec": {"cancel": true}}')  # fmt: skip
    assert wait_for_run(cluster, namespace, "quiet")["phase"] == "Cancelled"


def _followers(run_uid: str) -> list[int]:
    """The host processes of the run's follower (the kwok node runs a pod's execs as host
    processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"follow.mjs") for a in argv) and any(
            a.endswith(run_uid.encode()) for a in argv
        ):
            found.append(int(entry.name))
    return found


def test_a_broken_stream_goes_on_from_the_log_with_no_line_lost_or_repeated(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    command = "for i in $(seq 1 60); do echo line-$i; sleep 0.05; done"
    cluster.apply(command_run("chatty", "box", command), namespace)
    wait_for(lambda: len(_printed(cluster, namespace, "chatty")) >= 5, 60, what="five lines")
    uid = cluster.kubectl("get", "agentrun", "chatty", "-n", namespace,
                          "-o", "jsonpath={.metadata.uid}").stdout.strip()  # fmt: skip
    followers = wait_for(lambda: _followers(uid), 30, what="the run's follower")
    streams = _calls("stream")
    for pid in followers:
        os.kill(pid, signal.SIGKILL)  # the stream breaks mid-run
    status = wait_for_run(cluster, namespace, "chatty")
    assert status["phase"] == "Succeeded", status
    assert _printed(cluster, namespace, "chatty") == [f"line-{i}" for i in range(1, 61)]
    assert _calls("stream") - streams >= 1  # followed again, from the log's cursor
