"""What every harness module provides, and the helpers their parsers share."""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from paddock.api.agentrun import SESSION_ID_PATTERN, AgentRunSpec
from paddock.api.fields import parse_duration
from paddock.api.policy import SandboxPolicySpec
from paddock.runs.events import ERROR, SESSION_ID, Draft, one_line
from paddock.vocab.names import SESSIONS_DIR


class ShellWord(str):
    """A word of a harness script that the shell expands (a reference to one of Paddock's
    variables), made here only: ``command_line`` quotes every other part, whatever it holds
    (a session id the harness printed, say)."""

    __slots__ = ()


PROMPT = ShellWord('"$PADDOCK_PROMPT_FILE"')  # the prompt, as a file the launch wrote
WORKSPACE = ShellWord('"$PADDOCK_WORKSPACE"')

# The gate waits for the operator's answer longer than an approval may take (the operator
# answers even a request nobody decided: with a denial at spec.approvalTimeout), and a
# harness's hook is given longer still, since a hook that times out lets its command run.
GATE_MARGIN_SECONDS = 120
HOOK_MARGIN_SECONDS = 60
GATE_CLIENT = "gate.mjs"  # in the run's control directory (render/gate_scripts.py)


def gate_seconds(spec: AgentRunSpec) -> int:
    """How long the gate waits for the operator's answer to one command."""
    return int(parse_duration(spec.approval_timeout).total_seconds()) + GATE_MARGIN_SECONDS


def hook_seconds(spec: AgentRunSpec) -> int:
    """The timeout of a harness's hook that runs the gate."""
    return gate_seconds(spec) + HOOK_MARGIN_SECONDS


def gate_command(harness: str, spec: AgentRunSpec) -> str:
    """What a hook runs: the gate client from the run's control directory (read-only to the
    agent), with no environment but PATH, so that nothing the CLI's environment gained from
    the agent's files (Gemini CLI loads a workspace ``.env``: ``NODE_OPTIONS``, say) runs in
    it. A client killed by a signal exits 2 through the ``|| exit 2``, which blocks."""
    client = control_file(GATE_CLIENT)
    return f'env -i PATH="$PATH" node {client} {harness} {gate_seconds(spec)} || exit 2'


def own_home(variable: str, cli: str, keep: tuple[str, ...] = ()) -> str:
    """Shell lines that give a CLI a configuration home of the run's own, new at each launch
    (``$PADDOCK_RUN/home/<cli>``, in ``variable``): nothing the agent wrote into an earlier
    run's home, or into the sandbox's HOME, configures this run (a ``.env``, settings, hooks,
    plugins, agents, rules, a database of them). ``keep``: the folders of its conversations,
    which a run's ``sessionId`` resumes, linked from this sandbox's store of them on its volume
    (``SESSIONS_DIR``/``$PADDOCK_SANDBOX``/<cli>); they hold data the CLI reads back, never its
    configuration. Another sandbox's store (a snapshot of another sandbox restored into this
    one's volume) is deleted first: a conversation stays with the sandbox that had it."""
    sessions = f'"$PADDOCK_WORKSPACE/{SESSIONS_DIR}"'
    home, store = f'"$PADDOCK_RUN/home/{cli}"', f'{sessions}/"$PADDOCK_SANDBOX/{cli}"'
    lines = [f"export {variable}={home}", f"mkdir -p {home}"]
    if not keep:
        return "\n".join(lines) + "\n"
    lines += [
        f"mkdir -p {store}",
        f'find {sessions} -mindepth 1 -maxdepth 1 ! -name "$PADDOCK_SANDBOX" -exec rm -rf {{}} +',
        # Its .gitignore (*) keeps it out of the agent's git; written anew (no run of the
        # agent's is left to race it: the launch ended them), never through what was there.
        f"printf '*\\n' > {sessions}/.gitignore.new",
        f"mv -f {sessions}/.gitignore.new {sessions}/.gitignore",
    ]
    for name in keep:
        parent = posixpath.dirname(name)
        lines.append(f"mkdir -p {store}/{name}" + (f" {home}/{parent}" if parent else ""))
        lines.append(f"ln -s {store}/{name} {home}/{name}")
    return "\n".join(lines) + "\n"


def control_file(name: str) -> ShellWord:
    """A file of the run's control directory, as a shell word (``"$PADDOCK_CONTROL/name"``)."""
    return ShellWord(f'"$PADDOCK_CONTROL/{name}"')


@dataclass(frozen=True)
class Invocation:
    """How a harness is started: a bash script run in the workspace, with extra env, and
    the files of the run's control directory it reads (a CLI's settings, hooks, plugins and
    skills; ``claude/settings.json``), which the sandbox's sidecar writes, read-only to the
    agent. ``gated``: its tools go through Paddock's gate (the sidecar runs the server)."""

    script: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    gated: bool = False


@dataclass(frozen=True)
class WorkspaceContext:
    """What the Workspace gives the agent, from the operator's copy of its spec: AGENTS.md's
    text, each agent skill's SKILL.md by name, and its MCP servers in this harness's config
    format. A CLI that, as Paddock runs it, does not read them from the workspace's files
    (gated, those are the agent's to write; some CLIs trust no project config) is given them
    here. ``model_url``: the egress gateway's model route, for a CLI that reads its model's
    base URL from its config only (Codex), when the gateway holds the run's key."""

    instructions: str | None = None
    skills: dict[str, str] = field(default_factory=dict)
    mcp: dict[str, Any] = field(default_factory=dict)
    model_url: str | None = None


NO_WORKSPACE = WorkspaceContext()


class RequestKind(StrEnum):
    COMMAND = "command"
    FILE_WRITE = "file-write"
    NETWORK = "network"


@dataclass(frozen=True)
class Request:
    """What a hook asks the gate about: a shell command (``kind`` command), a file its tool
    writes (file-write, the path) or a web access (network, the URL or query).
    ``paddock_shell``: the CLI runs the command through Paddock's shell, given exactly
    ``target`` (its ``ticket``). ``writes``: for a tool that writes several files at once
    (Codex's ``apply_patch``; ``target`` is then the patch, shown whole to a person), each path
    it writes, judged as a file tool's write."""

    kind: RequestKind
    target: str
    paddock_shell: bool = False
    writes: tuple[str, ...] = ()

    @property
    def ticket(self) -> str | None:
        """The text an answer that allows this lets Paddock's shell run (None: no shell)."""
        return self.target if self.paddock_shell else None


@dataclass(frozen=True)
class Gate:
    """How a harness's tools reach Paddock's gate: its invocation with the CLI's
    pre-execution hook running the gate (and its own permissions projected from the policy),
    and what a hook's request asks about (None: not one the gate can read)."""

    invocation: Callable[[AgentRunSpec, SandboxPolicySpec, WorkspaceContext], Invocation]
    request_of: Callable[[dict[str, Any]], Request | None]


def tool_request(
    request: dict[str, Any],
    targets: dict[str, tuple[RequestKind, str]],
    tool_key: str = "tool_name",
    input_key: str = "tool_input",
) -> Request | None:
    """What a hook's request asks about: its tool (``request[tool_key]``) looked up in
    ``targets`` (tool -> the kind of request and the input field naming its target); None
    for a tool the gate does not judge or a request without its target."""
    tool = request.get(tool_key)
    if not isinstance(tool, str) or tool not in targets:
        return None
    kind, field_name = targets[tool]
    target = string_at(request, input_key, field_name)
    return None if target is None else Request(kind, target)


def string_at(value: Any, *keys: str) -> str | None:
    """``value[k1][k2]...`` when that is a string, else None."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Harness:
    """One agent CLI: its headless invocation and its stream parser; its gate, when its shell
    commands can be sent through Paddock's."""

    name: str
    invocation: Callable[[AgentRunSpec, WorkspaceContext], Invocation]
    parse_line: Callable[[str], list[Draft]]
    gate: Gate | None = None


def command_line(*parts: str | None) -> str:
    """Quote each part except the shell words (``ShellWord``) made above."""
    return " ".join(
        part if isinstance(part, ShellWord) else shlex.quote(part) for part in parts if part
    )


def option(flag: str, value: str | None) -> tuple[str | None, str | None]:
    return (flag, value) if value else (None, None)


def json_object(line: str) -> dict[str, Any] | Draft:
    """The line as a JSON object, or an error event saying why it is not one."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return Draft(
            ERROR,
            f"unreadable harness output: {exc.msg}",
            {"reason": "MalformedLine", "line": line, "error": str(exc)},
        )
    if not isinstance(value, dict):
        return Draft(
            ERROR,
            "harness output line is not a JSON object",
            {"reason": "MalformedLine", "line": line},
        )
    return value


def text_of(content: Any) -> str:
    """Text from a string or a list of content blocks (``{"type": "text", "text": ...}``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
        )
    return "" if content is None else json.dumps(content)


def call_summary(name: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "query"):
            if isinstance(arguments.get(key), str):
                return one_line(f"{name}: {arguments[key]}")
    return one_line(f"{name} {json.dumps(arguments)}" if arguments else name)


def session(session_id: Any, model: Any = None) -> Draft:
    """The harness's session id (Paddock keeps only changes of it); one that is no session id
    as the CLIs make them (the journal is the agent's to write) is kept as a notice only."""
    if not isinstance(session_id, str) or not re.match(SESSION_ID_PATTERN, session_id):
        return Draft("notice", "a session id Paddock does not take", {"sessionId": session_id})
    data = {"sessionId": session_id} | ({"model": model} if model else {})
    return Draft(SESSION_ID, f"session {session_id}", data)


def other(kind: str, event: dict[str, Any]) -> Draft:
    """A harness event Paddock has no kind for: kept, as a notice, so nothing is lost."""
    return Draft("notice", kind, {"harnessEvent": event})


def skill_files(skills: dict[str, str], folder: str) -> dict[str, str]:
    """Each skill's SKILL.md as a control file ``folder/NAME/SKILL.md``."""
    return {f"{folder}/{name}/SKILL.md": text for name, text in sorted(skills.items())}
