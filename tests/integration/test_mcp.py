"""``paddock mcp`` with the SDK's real MCP client, against the local cluster and a running
operator. Over stdio (the tools act with the admin's kubeconfig): the tools and their schemas,
a sandbox created and used (an allowed command's output and exit code, a denied one refused
with its rule, one to ask about pending until approved, a file written and read back, paths
and symlinks out of the workspace refused), a command run started and its events read to the
end. Over streamable HTTP (the server acts
with its own identity for callers who present a token): no token is refused, and each call of
an identity that may not do it is refused, while what it may do works."""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from paddock.api.approvals import digest_of
from paddock_dev import certs
from support import identity
from support.kube import Cluster
from support.model_server import Call, ScriptedModel
from support.sandboxes import ready_sandbox, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = pytest.mark.integration
CAREFUL = {"commands": {"default": "allow", "deny": ["rm *"], "ask": ["touch *"]}}
TOOLS = {
    "list_sandboxes", "get_sandbox", "create_sandbox", "delete_sandbox", "pause_sandbox",
    "resume_sandbox", "exec", "read_file", "write_file", "list_files", "start_run", "get_run",
    "read_events", "cancel_run", "approve", "deny",
}  # fmt: skip


def stdio(cluster: Cluster, namespace: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "paddock.cli", "mcp", "-n", namespace],
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": os.environ["PATH"]},
    )


def text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool's structured result; a failed call fails the test with the tool's words."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {text(result)}"
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} was not refused: {result.structured_content}"
    return text(result)


async def read_to_end(client: Client, run: str) -> list[dict[str, Any]]:
    """Every event of the run, read with read_events (waiting for new ones) to its end."""
    events: list[dict[str, Any]] = []
    seq, ended = 0, False
    while not ended:
        page = await call(client, "read_events", name=run, from_seq=seq, wait_seconds=20)
        events += page["events"]
        seq, ended = page["nextSeq"], page["ended"]
    return events


def test_over_stdio_a_sandbox_is_made_and_used_through_the_tools(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "SandboxPolicy",
            "metadata": {"name": "no-rm"},
            "spec": CAREFUL,
        },
        namespace,
    )

    async def scenario() -> None:
        async with Client(stdio(cluster, namespace)) as mcp:
            listed = await mcp.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            schema = next(t for t in listed.tools if t.name == "exec").input_schema
            assert {"sandbox", "command"} <= set(schema["required"])

            made = await call(mcp, "create_sandbox", name="box", workspace="app", policy="no-rm")
            assert made["name"] == "box"
            await asyncio.to_thread(wait_for_phase, cluster, namespace, "box", "Ready")
            box = await call(mcp, "get_sandbox", name="box")
            assert (box["phase"], box["policy"]) == ("Ready", "no-rm")
            names = [s["name"] for s in (await call(mcp, "list_sandboxes"))["result"]]
            assert names == ["box"]

            ran = await call(mcp, "exec", sandbox="box", command="echo hi; echo oops >&2; exit 3")
            assert (ran["exitCode"], ran["stdout"]) == (3, "hi\n")
            assert "oops" in ran["stderr"]
            denied = await refused(mcp, "exec", sandbox="box", command="rm -rf src")
            assert "denied" in denied
            assert "rm" in denied

            wrote = await call(
                mcp, "write_file", sandbox="box", path="notes/a.txt", content="x\ny\n"
            )
            assert wrote["written"] == 4
            read = await call(mcp, "read_file", sandbox="box", path="notes/a.txt")
            assert (read["content"], read["size"], read["truncated"]) == ("x\ny\n", 4, False)
            entries = (await call(mcp, "list_files", sandbox="box", path="notes"))["entries"]
            assert entries == [{"name": "a.txt", "type": "file", "size": 4}]
            assert "outside the workspace" in await refused(
                mcp, "read_file", sandbox="box", path="../../etc/hostname"
            )
            await call(mcp, "exec", sandbox="box", command="ln -s /etc escape")
            assert "resolves outside the workspace" in await refused(
                mcp, "read_file", sandbox="box", path="escape/hostname"
            )
            assert "resolves outside the workspace" in await refused(
                mcp, "write_file", sandbox="box", path="escape/x", content="no"
            )

            asked = await call(mcp, "exec", sandbox="box", command="touch ok.txt && echo made")
            pending = asked["pendingApproval"]
            assert pending["id"].startswith("command.")
            assert pending["command"] == "touch ok.txt && echo made"
            assert "ok.txt" not in str(await call(mcp, "list_files", sandbox="box"))
            other = {pending["id"]: digest_of("touch ok.txt")}  # not the text shown
            assert "not the text that was shown" in await refused(
                mcp, "approve", run=pending["run"], digests=other
            )
            assert pending["digest"] == digest_of(pending["command"])
            await call(
                mcp, "approve", run=pending["run"], digests={pending["id"]: pending["digest"]}
            )
            after = await read_to_end(mcp, pending["run"])
            assert [e["data"].get("text") for e in after if e["type"] == "output"] == ["made"]
            assert after[-1]["data"]["exitCode"] == 0

            run = await call(
                mcp, "start_run", harness="command", command="echo one; echo two", sandbox="box"
            )
            events = await read_to_end(mcp, run["name"])
            texts = [e["data"].get("text") for e in events if e["type"] == "output"]
            assert texts == ["one", "two"]
            assert events[-1]["type"] == "run.completed"
            assert [e["seq"] for e in events] == list(range(len(events)))
            assert (await call(mcp, "get_run", name=run["name"]))["phase"] == "Succeeded"

    asyncio.run(scenario())


@contextmanager
def _serving(
    cluster: Cluster, namespace: str, helm: str, tmp_path: Path, *args: str
) -> Iterator[str]:
    """``paddock mcp --http ARGS`` as its own process, with the identity the chart gives it,
    on a port it binds itself (port 0: no other process can hold it); the URL it prints."""
    kubeconfig = identity.chart_identity(cluster, helm, namespace, "mcp", tmp_path)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    argv = [sys.executable, "-m", "paddock.cli", "mcp", "-n", namespace, "--http", "127.0.0.1:0"]
    log_path = tmp_path / "mcp.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([*argv, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = wait_for(lambda: _announced(log_path), 30, what="the MCP server's URL")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        for kind in ("clusterrolebinding", "clusterrole"):
            cluster.kubectl("delete", kind, f"{namespace}-mcp", "--ignore-not-found")


def _announced(log: Path) -> str | None:
    found = re.search(r"paddock mcp: serving (\S+)", log.read_text())
    return found.group(1) if found else None


@pytest.fixture
def http_server(cluster: Cluster, namespace: str, helm: str, tmp_path: Path) -> Iterator[str]:
    with _serving(cluster, namespace, helm, tmp_path) as url:
        yield url


def _as(url: str, token: str, trusted: ssl.SSLContext | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token}"}
    client = httpx2.AsyncClient(headers=headers, verify=trusted or True)
    return Client(streamable_http_client(url, http_client=client))


def test_over_https_the_server_presents_its_certificate_and_serves_the_tools(
    cluster: Cluster, namespace: str, operator: Any, helm: str, tmp_path: Path
) -> None:
    pki = certs.generate_pki(tmp_path / "pki", ("127.0.0.1",))
    tls = ("--tls-cert", str(pki.serving_cert), "--tls-key", str(pki.serving_key))
    reader = identity.role_token(
        cluster, namespace, "reader",
        [{"apiGroups": ["paddock.dev"], "resources": ["sandboxes"], "verbs": ["get", "list"]}],
    )  # fmt: skip
    with _serving(cluster, namespace, helm, tmp_path, *tls) as url:
        assert url.startswith("https://")
        host, port = url.removeprefix("https://").split("/", 1)[0].split(":")
        presented = ssl.get_server_certificate((host, int(port)))
        assert presented.strip() == pki.serving_cert.read_text().strip()

        async def scenario() -> None:
            trusted = ssl.create_default_context(cafile=str(pki.ca_cert))
            async with _as(url, reader, trusted) as mcp:
                assert {t.name for t in (await mcp.list_tools()).tools} == TOOLS
                assert (await call(mcp, "list_sandboxes"))["result"] == []

        asyncio.run(scenario())


def test_over_http_each_call_is_authorised_for_the_token_it_carries(
    cluster: Cluster, namespace: str, operator: Any, http_server: str
) -> None:
    ready_sandbox(cluster, namespace, "box")
    reader = identity.role_token(
        cluster, namespace, "reader",
        [{"apiGroups": ["paddock.dev"], "resources": ["sandboxes"], "verbs": ["get", "list"]}],
    )  # fmt: skip
    nobody = identity.role_token(cluster, namespace, "nobody", [])
    runner = identity.role_token(
        cluster, namespace, "runner",
        [
            {"apiGroups": ["paddock.dev"], "resources": ["agentruns"],
             "verbs": ["get", "create", "delete"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
        ],
    )  # fmt: skip
    anonymous = httpx2.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert anonymous.status_code == 401

    async def scenario() -> None:
        async with _as(http_server, reader) as mcp:
            listed = await call(mcp, "list_sandboxes")
            assert [s["name"] for s in listed["result"]] == ["box"]
            said = await refused(mcp, "exec", sandbox="box", command="true")
            assert f"system:serviceaccount:{namespace}:reader may not create agentruns" in said
            assert "may not patch sandboxes" in await refused(mcp, "pause_sandbox", name="box")
        async with _as(http_server, runner) as mcp:  # the server's own rights do the rest
            ran = await call(mcp, "exec", sandbox="box", command="echo via-http")
            assert (ran["exitCode"], ran["stdout"]) == (0, "via-http\n")
        async with _as(http_server, nobody) as mcp:
            said = await refused(mcp, "list_sandboxes")
            assert f"system:serviceaccount:{namespace}:nobody may not list sandboxes" in said
            other = await refused(mcp, "get_sandbox", name="box", namespace="default")
            assert "may not get sandboxes in namespace default" in other

    asyncio.run(scenario())
    assert (
        json.loads(cluster.kubectl("get", "sandbox", "box", "-n", namespace, "-o", "json").stdout)[
            "spec"
        ]
        .get("lifecycle", {})
        .get("paused")
        is not True
    )  # the refused pause changed nothing


def test_claude_code_runs_a_command_in_a_sandbox_through_paddock_mcp(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, tmp_path: Path
) -> None:
    """The real Claude Code CLI, with ``paddock mcp`` in its MCP config, told by the scripted
    model to call the exec tool: the command runs in the sandbox, and its output is the tool
    result in Claude Code's stream."""
    ready_sandbox(cluster, namespace, "box")
    cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "bash", "-c", 'echo only-in-the-sandbox > "$PADDOCK_WORKSPACE/marker.txt"',
    )  # fmt: skip
    server = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "paddock.cli", "mcp", "-n", namespace],
        "env": {"KUBECONFIG": str(cluster.kubeconfig)},
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"paddock": server}}))
    home = tmp_path / "home"
    home.mkdir()
    step = Call("mcp__paddock__exec", {"sandbox": "box", "command": "cat marker.txt"})
    with ScriptedModel(step) as model:
        env = {
            "PATH": f"{agent_clis}:{os.environ['PATH']}",
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "sk-scripted-mcp",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        done = subprocess.run(
            [
                "claude", "-p", "--output-format", "stream-json", "--verbose",
                "--model", "claude-sonnet-4-5", "--mcp-config", str(config),
                "--strict-mcp-config", "--allowedTools", "mcp__paddock__exec",
            ],
            input="What is in marker.txt?", capture_output=True, text=True, env=env,
            timeout=240, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    offered = [t.get("name") for r in model.requests for t in r["body"].get("tools") or []]
    assert "mcp__paddock__exec" in offered
    stream = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [
        block
        for item in stream
        if item.get("type") == "user"
        for block in item["message"]["content"]
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        # not the result of Claude Code's wait for its MCP servers, if the model asked for it
        and str(block.get("tool_use_id")).startswith("toolu_scripted_")
    ]
    assert len(results) == 1
    assert not results[0].get("is_error"), results[0]
    assert "only-in-the-sandbox" in json.dumps(results[0]["content"])
