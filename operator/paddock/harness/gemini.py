"""harness: gemini — ``gemini -p --output-format stream-json``."""

from __future__ import annotations

import json
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.harness.base import (
    NO_WORKSPACE,
    PROMPT,
    Gate,
    Harness,
    Invocation,
    Request,
    RequestKind,
    WorkspaceContext,
    call_summary,
    command_line,
    control_file,
    gate_command,
    hook_seconds,
    json_object,
    option,
    other,
    own_home,
    session,
    skill_files,
    tool_request,
)
from paddock.render import gate_scripts
from paddock.runs import events as ev
from paddock.runs.events import Draft

SETTINGS = "gemini/settings.json"
POLICY_FILE = "gemini/policy.toml"
SKILLS = "gemini/skills"
FILE_TOOLS = ("write_file", "replace")
WEB_TOOLS = ("web_fetch", "google_web_search")
# Where each tool Paddock gates names its target, and what it asks for.
TOOL_TARGETS: dict[str, tuple[RequestKind, str]] = {
    "run_shell_command": (RequestKind.COMMAND, "command"),
    "write_file": (RequestKind.FILE_WRITE, "file_path"),
    "replace": (RequestKind.FILE_WRITE, "file_path"),
    "web_fetch": (RequestKind.NETWORK, "prompt"),
    "google_web_search": (RequestKind.NETWORK, "query"),
}
# Gemini CLI reads user settings from $GEMINI_CLI_HOME/.gemini (the run's own home, below):
# the run's settings are copied there at launch.
USER_SETTINGS = '"${GEMINI_CLI_HOME:-$HOME}/.gemini"'


# Gemini CLI reads ``.gemini/`` (settings, policies, extensions, its ``.env``) and a ``.env``
# from its home: a run's is its own.
# Only its chats are kept: the rest of ``.gemini/tmp`` holds programs it runs (``bin/rg``)
# and memory it loads. Its folder there is named after the workspace as Gemini CLI names it
# (the last part of its real path, in lower case, each run of other characters one ``-``):
# ``workspace`` for ``/workspace``.
HOME = (
    'project=$(basename "$(pwd -P)" | LC_ALL=C tr A-Z a-z | LC_ALL=C sed -E '
    "'s/[^a-z0-9]+/-/g; s/^-//; s/-$//')\n"
    + "project=${project:-project}\n"
    + own_home("GEMINI_CLI_HOME", "gemini", (".gemini/tmp/$project/chats",))
)


def _argv(spec: AgentRunSpec, *more: str) -> str:
    return command_line(
        "gemini",
        "--output-format",
        "stream-json",
        "--skip-trust",
        *more,
        *option("-m", spec.model),
        *option("--resume", spec.session_id),
    )


def _auth(spec: AgentRunSpec) -> dict[str, Any]:
    """Gemini CLI 0.61 refuses to start headless without an auth type in its settings: the
    API key's, when the run has GEMINI_API_KEY or a modelKey (Vertex AI's with
    GOOGLE_GENAI_USE_VERTEXAI)."""
    names = {e.name for e in spec.env} | {s.name for s in spec.secrets}
    if "GOOGLE_GENAI_USE_VERTEXAI" in names:
        return {"security": {"auth": {"selectedType": "vertex-ai"}}}
    if "GEMINI_API_KEY" in names or spec.model_key is not None:
        return {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    return {}


def _script(
    spec: AgentRunSpec, settings: dict[str, Any], *more: str, before_exec: str = ""
) -> tuple[str, str]:
    script = (
        HOME + f"mkdir -p {USER_SETTINGS}\n"
        f"cp {control_file(SETTINGS)} {USER_SETTINGS}/settings.json\n"
        f"{before_exec}exec {_argv(spec, *more)} < {PROMPT}\n"
    )
    return script, json.dumps(settings)


# Gemini CLI runs each command and each hook as ``bash -c TEXT``, with the ``bash`` its PATH
# gives. Paddock's shell comes first there: started by the CLI, it runs only Paddock's hook and
# the commands the gate allowed, so that a command whose hook was killed (with its shell:
# Gemini CLI then runs the command) is refused instead, and it runs them with no variable but
# the harness's and those Gemini CLI adds itself. It knows the CLI's process, and the names of
# the harness's environment, from this script's registration with the gate server just before
# the exec (the CLI does not relaunch itself in a child: that would be another process). With
# GIT_CONFIG_COUNT=0, every git configuration variable the CLI gives a command is its own.
PADDOCK_SHELL = (
    f'export PATH={control_file("bin")}:"$PATH" GEMINI_CLI_NO_RELAUNCH=true GIT_CONFIG_COUNT=0\n'
    f'node {control_file(gate_scripts.CLIENT)} register "$$" $(compgen -e) || exit 3\n'
)

# JavaScript's whitespace (``String.prototype.trim``): the ends Gemini CLI trims off a command.
JS_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)


def shell_text(command: str) -> str:
    """The command as Gemini CLI 0.61 puts it into its shell's text (client.mjs takes it out
    again): trimmed, and a space after a final backslash. A command that starts with a shell of
    its own (``bash -c '...'``) Gemini CLI unwraps first, with a parser of its own: that text
    is not this one, and Paddock's shell refuses it."""
    trimmed = command.strip(JS_WHITESPACE)
    return trimmed + " " if trimmed.endswith("\\") else trimmed


# Gemini CLI connects no MCP server, even a user-level one, in a folder it does not trust,
# and ``--skip-trust`` alone does not change that.
TRUSTED = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}


def invocation(spec: AgentRunSpec, workspace: WorkspaceContext = NO_WORKSPACE) -> Invocation:
    """With no policy the pod is the boundary: every tool runs without asking (headless,
    Gemini CLI would leave out the tools that ask), in a trusted workspace (whose
    ``.gemini/settings.json`` gives the Workspace's MCP servers)."""
    auth = _auth(spec)
    if not auth:
        script = HOME + f"exec {_argv(spec, '--approval-mode', 'yolo')} < {PROMPT}\n"
        return Invocation(script=script, env=TRUSTED)
    script, settings = _script(spec, auth, "--approval-mode", "yolo")
    return Invocation(script=script, env=TRUSTED, files={SETTINGS: settings})


def native_policy(policy: SandboxPolicySpec, mcp_servers: tuple[str, ...] = ()) -> str:
    """The policy as Gemini CLI admin policy rules (the highest tier, which no user or
    workspace rule overrides): its shell allowed, redirections too, since the gate judges
    each command; the
    file and web tools per fileWrite and network, those to ask about allowed too, since the
    gate asks (headless, Gemini's own ask is a refusal); the tools of the Workspace's MCP
    servers allowed (headless, Gemini leaves out a tool it would ask about)."""
    decisions = [("run_shell_command", Decision.ALLOW)]
    decisions += [(tool, policy.capabilities.file_write) for tool in FILE_TOOLS]
    decisions += [(tool, policy.capabilities.network) for tool in WEB_TOOLS]
    rules = [
        f'[[rule]]\ntoolName = "{tool}"\n'
        f'decision = "{"deny" if decision == Decision.DENY else "allow"}"\npriority = 900\n'
        for tool, decision in decisions
    ]
    # Headless, Gemini CLI refuses a shell command with a redirection unless its rule says
    # otherwise; the gate judges each redirection (fileWrite, protected places).
    rules[0] += "allowRedirection = true\n"
    rules += [
        f'[[rule]]\nmcpName = {json.dumps(name)}\ntoolName = "*"\ndecision = "allow"\n'
        "priority = 900\n"
        for name in mcp_servers
    ]
    return "\n".join(rules)


def gated_tools(policy: SandboxPolicySpec) -> list[str]:
    """The tools whose calls go through the gate: the shell, the file tools (a write into the
    workspace's ``.gemini/`` would give the next run hooks and MCP servers: the gate refuses
    it whatever fileWrite says), and the web tools when the policy asks about them."""
    tools = ["run_shell_command"]
    if policy.capabilities.file_write != Decision.DENY:
        tools.extend(FILE_TOOLS)
    if policy.capabilities.network == Decision.ASK:
        tools.extend(WEB_TOOLS)
    return tools


# Variables no .env file may give the gated CLI, which loads the workspace's .gemini/.env into
# its environment (and so its shell's and its hooks') for any name it does not have yet: set
# empty here, where empty means none, they are had. They make a shell or a runtime run code
# on start.
ENV_FROM_FILES = (
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "NODE_OPTIONS", "LD_PRELOAD", "LD_AUDIT",
    "LD_LIBRARY_PATH", "PYTHONSTARTUP", "PYTHONPATH", "NODE_PATH", "PERL5OPT", "PERL5LIB",
    "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
    "GIT_CONFIG_PARAMETERS",
)  # fmt: skip


def gated(
    spec: AgentRunSpec, policy: SandboxPolicySpec, workspace: WorkspaceContext = NO_WORKSPACE
) -> Invocation:
    """Gemini CLI with a BeforeTool hook that runs the gate, in the user settings it reads
    (copied from the control directory at each launch, so that what the agent wrote there
    does not reach the next run), and the policy's rules as an admin policy
    (``--admin-policy``). Gemini CLI runs hooks in a trusted workspace only, so the workspace
    is trusted (``--skip-trust``): its ``.gemini/`` is a protected place, and Gemini's own file
    tools always go through the gate (which refuses a write there whatever fileWrite says).
    No extension is loaded (``--extensions none``), no workspace ``.env`` is read
    (``advanced.ignoreLocalEnv``), and the variables that make a shell or a program run code
    on start are set empty, so that no ``.env`` file can give them. The Workspace's MCP
    servers and agent skills come from the operator, in the user settings and the user's
    skills directory. Gemini's hook timeout is in milliseconds."""
    # The hook is a program of Paddock's shell's (bin/gate-hook), named bare: Gemini CLI expands
    # variables in a hook's command, and the shell runs only that one.
    hook = {"type": "command", "command": "gate-hook", "timeout": hook_seconds(spec) * 1000}
    settings: dict[str, Any] = {
        **_auth(spec),
        "hooks": {"BeforeTool": [{"matcher": "|".join(gated_tools(policy)), "hooks": [hook]}]},
        "advanced": {"ignoreLocalEnv": True},
    }
    if workspace.mcp:  # the Workspace's, which the workspace's own settings do not give
        settings["mcpServers"] = workspace.mcp
    more = ["--admin-policy", control_file(POLICY_FILE), "--extensions", "none"]
    script, text = _script(spec, settings, *more, before_exec=PADDOCK_SHELL)
    files = {
        SETTINGS: text,
        POLICY_FILE: native_policy(policy, tuple(workspace.mcp)),
        **gate_scripts.paddock_shell("gemini", gate_command("gemini", spec)),
    }
    if workspace.skills:
        files |= skill_files(workspace.skills, SKILLS)
        into = f"{USER_SETTINGS}/skills"
        script = f"mkdir -p {into}\ncp -r {control_file(SKILLS)}/. {into}/\n" + script
    env = dict.fromkeys(ENV_FROM_FILES, "")
    return Invocation(script=script, env=env, files=files, gated=True)


def request_of(request: dict[str, Any]) -> Request | None:
    """What a BeforeTool request asks about: ``tool_input.command`` of the shell as Paddock's
    shell will be given it (``shell_text``: the text judged is the text that runs), the path
    of a file tool, the prompt or query of a web tool."""
    asked = tool_request(request, TOOL_TARGETS)
    if asked is None or asked.kind != RequestKind.COMMAND:
        return asked
    return Request(asked.kind, shell_text(asked.target), paddock_shell=True)


def parse_line(line: str) -> list[Draft]:
    event = json_object(line)
    if isinstance(event, Draft):
        return [event]
    kind = event.get("type")
    if kind == "init":
        return [session(event.get("session_id"), event.get("model"))]
    if kind == "message":
        if event.get("role") != "assistant":
            return []
        text = str(event.get("content", ""))
        return [
            Draft(
                ev.MESSAGE,
                text,
                {"role": "assistant", "text": text, "delta": bool(event.get("delta"))},
            )
        ]
    if kind == "tool_use":
        name, arguments = str(event.get("tool_name", "?")), event.get("parameters")
        return [
            Draft(
                ev.TOOL_CALL,
                call_summary(name, arguments),
                {"id": event.get("tool_id"), "name": name, "input": arguments},
            )
        ]
    if kind == "tool_result":
        output = str(event.get("output") or event.get("status") or "")
        return [
            Draft(
                ev.TOOL_RESULT,
                output,
                {
                    "id": event.get("tool_id"),
                    "output": output,
                    "isError": event.get("status") == "error",
                },
            )
        ]
    if kind == "error":
        message = str(event.get("message") or event.get("error") or event)
        return [Draft(ev.ERROR, message, {"message": message, "severity": event.get("severity")})]
    if kind == "result":
        stats = event.get("stats") or {}
        status = str(event.get("status", ""))
        return [
            Draft(
                ev.RESULT,
                status,
                {
                    "isError": status == "error",
                    "inputTokens": stats.get("input_tokens"),
                    "outputTokens": stats.get("output_tokens"),
                    "stats": stats,
                    "error": event.get("error"),
                },
            )
        ]
    return [other(str(kind), event)]


HARNESS = Harness("gemini", invocation, parse_line, Gate(gated, request_of))
