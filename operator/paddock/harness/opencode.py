"""harness: opencode — ``opencode run --format json``."""

from __future__ import annotations

import json
import shlex
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.harness.base import (
    NO_WORKSPACE,
    PROMPT,
    WORKSPACE,
    Gate,
    Harness,
    Invocation,
    Request,
    RequestKind,
    WorkspaceContext,
    call_summary,
    command_line,
    control_file,
    gate_seconds,
    json_object,
    option,
    other,
    own_home,
    session,
    tool_request,
)
from paddock.runs import events as ev
from paddock.runs.events import Draft


def _argv(spec: AgentRunSpec) -> str:
    return command_line(
        "opencode",
        "run",
        "--format",
        "json",
        "--dir",
        WORKSPACE,
        *option("-m", spec.model),
        *option("--session", spec.session_id),
    )


# OpenCode keeps its sessions in a database in its data directory (``$XDG_DATA_HOME/opencode``),
# which also holds what decides what a run may do (a session's own permission rules, which win
# over the run's config; accounts whose remote config adds plugins): a run's is its own and
# new, and none is kept. A run of OpenCode therefore resumes no earlier session.
DATA = own_home("XDG_DATA_HOME", "opencode")


def invocation(spec: AgentRunSpec, workspace: WorkspaceContext = NO_WORKSPACE) -> Invocation:
    # opencode run reads the message from stdin when it is given none as arguments: one argv
    # word holds at most 128 KiB, and a prompt may be 1 MiB.
    return Invocation(script=DATA + f"exec {_argv(spec)} < {PROMPT}\n")


CONFIG = "opencode/config.json"
PLUGIN = "opencode/gate-plugin.mjs"
CONTROL_MARK = "@PADDOCK_CONTROL@"  # the run's control directory, known in the sandbox only
# The plugin: every call of a gated tool (bash, and those the policy asks about) goes to the
# gate client beside it first (the request as JSON on its stdin, no environment but PATH);
# anything but its "allow" (a refusal, a gate that cannot start or is killed) throws, which
# blocks the call and shows the agent the message. OpenCode sets no time limit on a plugin.
GATE_PLUGIN = """import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
const GATED = new Set(@GATED@);
const CLIENT = fileURLToPath(new URL("../gate.mjs", import.meta.url));
export const PaddockGate = async () => ({
  "tool.execute.before": async (input, output) => {
    if (!GATED.has(input.tool)) return;
    const request = JSON.stringify({ tool: input.tool, args: output.args });
    const [code, said] = await new Promise((resolve) => {
      let err = "";
      const gate = spawn("node", [CLIENT, "opencode", "@SECONDS@"],
                         { stdio: ["pipe", "ignore", "pipe"], env: { PATH: process.env.PATH } });
      gate.stderr.on("data", (chunk) => { err += chunk; });
      gate.on("error", (e) => resolve([2, "Paddock's gate could not start: " + e.message]));
      gate.on("close", (c) => resolve([c, err]));
      gate.stdin.end(request);
    });
    if (code !== 0) throw new Error(said.trim() || "Paddock's gate refused the command.");
  },
});
"""


def gated(
    spec: AgentRunSpec, policy: SandboxPolicySpec, workspace: WorkspaceContext = NO_WORKSPACE
) -> Invocation:
    """OpenCode with Paddock's gate as a plugin (``tool.execute.before`` on bash), from the
    run's own config, merged into the run's ``OPENCODE_CONFIG_CONTENT``, with project config
    off (``OPENCODE_DISABLE_PROJECT_CONFIG=1``), which OpenCode's older config loader honours;
    nor is the user config of an earlier run read (``XDG_CONFIG_HOME`` is the run's own, new
    directory), so a plugin the agent leaves in ``~/.config/opencode/plugin/`` never runs.
    That also leaves out the workspace's AGENTS.md: the Workspace's instructions come from the
    operator, as an instructions file of the run's. (OpenCode 1.18's newer loader still reads
    the workspace's and ``~/.opencode``'s config and plugins: docs/policy.md.)"""
    own = next((e.value for e in spec.env if e.name == CONFIG_ENV and e.value), None)
    try:
        config = json.loads(own) if own else {}
    except ValueError:
        config = {}  # OpenCode would refuse it too; the gate's config stands alone
    config = config if isinstance(config, dict) else {}
    config["plugin"] = [*(config.get("plugin") or []), f"file://{CONTROL_MARK}/{PLUGIN}"]
    config["permission"] = permissions(policy)
    if workspace.mcp:  # the Workspace's servers; the run's own, by the same name, win
        config["mcp"] = {**workspace.mcp, **(config.get("mcp") or {})}
    files: dict[str, str] = {}
    if workspace.instructions:
        files[INSTRUCTIONS] = workspace.instructions
        instructions = f"{CONTROL_MARK}/{INSTRUCTIONS}"
        config["instructions"] = [*(config.get("instructions") or []), instructions]
    plugin = GATE_PLUGIN.replace("@GATED@", json.dumps(gated_tools(policy)))
    files[PLUGIN] = plugin.replace("@SECONDS@", str(gate_seconds(spec)))
    files[CONFIG] = json.dumps(config)
    script = DATA + (
        f"config=$(cat {control_file(CONFIG)})\n"
        f'export {CONFIG_ENV}="${{config//{CONTROL_MARK}/$PADDOCK_CONTROL}}"\n'
        # A user config directory and a cache of the run's own (OpenCode writes into the
        # first, and loads plugins and packages from both), so nothing of an earlier run's.
        'export XDG_CONFIG_HOME="$PADDOCK_RUN/config" XDG_CACHE_HOME="$PADDOCK_RUN/cache"\n'
        # OpenCode installs its plugin package into a config directory whose node_modules is
        # missing or whose lock file does not list it, at every start, from the npm registry
        # (16-75 s; longer behind a fence that drops it). Paddock's plugin imports nothing: the
        # run's directory says the package is there, and nothing is fetched.
        'mkdir -p "$XDG_CONFIG_HOME/opencode/node_modules"\n'
        f'echo {shlex.quote(PLUGIN_LOCK)} > "$XDG_CONFIG_HOME/opencode/package-lock.json"\n'
        f"exec {_argv(spec)} < {PROMPT}\n"
    )
    env = {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"}
    return Invocation(script=script, env=env, files=files, gated=True)


CONFIG_ENV = "OPENCODE_CONFIG_CONTENT"
# A lock file whose root lists OpenCode's plugin package: OpenCode's own check of a config
# directory's dependencies (every name it would add is in the lock's root package).
PLUGIN_LOCK = json.dumps({"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}})
INSTRUCTIONS = "opencode/instructions.md"


# Where each tool Paddock gates names its target, and what it asks for.
TOOL_TARGETS: dict[str, tuple[RequestKind, str]] = {
    "bash": (RequestKind.COMMAND, "command"),
    "write": (RequestKind.FILE_WRITE, "filePath"),
    "edit": (RequestKind.FILE_WRITE, "filePath"),
    "webfetch": (RequestKind.NETWORK, "url"),
}
FILE_TOOLS = ("write", "edit")


def permissions(policy: SandboxPolicySpec) -> dict[str, str]:
    """The policy as OpenCode's own permissions: bash allowed (the gate judges each command),
    edits per fileWrite and web fetches per network, and those to ask about allowed too,
    since the gate asks (``opencode run`` rejects an ask and ends the run)."""

    def native(decision: Decision) -> str:
        return "deny" if decision == Decision.DENY else "allow"

    return {
        "bash": "allow",
        "edit": native(policy.capabilities.file_write),
        "webfetch": native(policy.capabilities.network),
        # OpenCode 1.18 asks (so, headless, refuses) before touching a path it takes to be
        # outside the project, which a workspace that is no git repository was, whole; the
        # pod is the boundary, and writes are judged by edit and the gate.
        "external_directory": "allow",
    }


def gated_tools(policy: SandboxPolicySpec) -> list[str]:
    """The tools whose calls go through the gate: bash, the file tools (OpenCode runs code it
    finds in its data directory, a protected place the gate refuses a write into whatever
    fileWrite says), and webfetch when the policy asks about it."""
    tools = ["bash"]
    if policy.capabilities.file_write != Decision.DENY:
        tools.extend(FILE_TOOLS)
    if policy.capabilities.network == Decision.ASK:
        tools.append("webfetch")
    return tools


def request_of(request: dict[str, Any]) -> Request | None:
    """What the plugin's request asks about: ``args.command`` of bash, the path of a file
    tool, the URL of webfetch."""
    return tool_request(request, TOOL_TARGETS, "tool", "args")


def _tool(part: dict[str, Any]) -> list[Draft]:
    state = part.get("state") or {}
    name, call_id = str(part.get("tool", "?")), part.get("callID") or part.get("id")
    drafts = [
        Draft(
            ev.TOOL_CALL,
            call_summary(name, state.get("input")),
            {"id": call_id, "name": name, "input": state.get("input")},
        )
    ]
    status = state.get("status")
    if status in ("completed", "error"):
        output = str(state.get("output") or state.get("error") or "")
        drafts.append(
            Draft(
                ev.TOOL_RESULT,
                output or status,
                {"id": call_id, "name": name, "output": output, "isError": status == "error"},
            )
        )
    return drafts


def parse_line(line: str) -> list[Draft]:
    event = json_object(line)
    if isinstance(event, Draft):
        return [event]
    kind, part = event.get("type"), event.get("part") or {}
    drafts = []
    session_id = event.get("sessionID") or part.get("sessionID")
    if kind == "step_start" and session_id:
        drafts.append(session(session_id))
    if kind == "step_start":
        return drafts
    if kind == "tool_use":
        return _tool(part)
    if kind == "text":
        text = str(part.get("text", ""))
        return [Draft(ev.MESSAGE, text, {"role": "assistant", "text": text})]
    if kind == "step_finish":
        tokens = part.get("tokens") or {}
        return [
            Draft(
                ev.RESULT,
                str(part.get("reason") or "step finished"),
                {
                    "isError": False,
                    "costUsd": part.get("cost"),
                    "inputTokens": tokens.get("input"),
                    "outputTokens": tokens.get("output"),
                },
            )
        ]
    if kind == "error":
        error = event.get("error") or part.get("error") or event
        message = (
            str(error.get("message") or error.get("name") or error)
            if isinstance(error, dict)
            else str(error)
        )
        data = error.get("data") if isinstance(error, dict) else None
        if isinstance(data, dict) and data.get("message"):
            message = str(data["message"])
        return [Draft(ev.ERROR, message, {"message": message, "error": error})]
    if kind == "done":
        return [
            Draft(
                ev.NOTICE,
                f"done: {event.get('reason')}",
                {"reason": event.get("reason"), "rejected": event.get("rejected")},
            )
        ]
    return [other(str(kind), event)]


HARNESS = Harness("opencode", invocation, parse_line, Gate(gated, request_of))
