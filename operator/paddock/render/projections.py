"""What the ``project`` init container writes into the workspace: AGENTS.md, skills, and each
harness's MCP and plugin configuration.

Secret values never appear here: an MCP header taken from a Secret is written as a reference to
an environment variable, which the sandbox container gets from the Secret (``secret_env``), and
each harness expands at start. An MCP server's URL is a reference too (``mcp_url_env``): the
sandbox container holds the server's own; with an egress gateway, the gateway holds the
server's secret headers instead of the sandbox (``gateway_held``), and each run sets the
variable to its credential route to the server (``render.credential_routes.mcp_route``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from paddock.api.common import SecretKeySelector
from paddock.api.skills import AgentSkill, McpSkill
from paddock.api.workspace import WorkspaceSpec

PADDOCK_DIR = ".paddock"
HARNESS_DIR = f"{PADDOCK_DIR}/harness"
INSTRUCTION_LINKS = ("CLAUDE.md", "GEMINI.md")


@dataclass(frozen=True)
class GitCheckout:
    """A git skill to clone at depth 1 into ``path``, with the env var that holds its token."""

    name: str
    repo: str
    ref: str | None
    path: str
    token_env: str | None


@dataclass
class Projection:
    """Files (workspace-relative path -> content), harness config files to install where the
    repository has none (install path -> path under .paddock/harness), git skills, the env vars
    to take from Secrets, and warnings about what a harness cannot use."""

    files: dict[str, str] = field(default_factory=dict)
    harness_files: dict[str, str] = field(default_factory=dict)
    git_checkouts: list[GitCheckout] = field(default_factory=list)
    secret_env: dict[str, SecretKeySelector] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # the MCP servers' URLs, by variable
    gateway_held: set[str] = field(default_factory=set)  # of secret_env: an egress gateway's


def env_name(*parts: str) -> str:
    """``("mcp", "docs", "Authorization")`` -> ``PADDOCK_MCP_DOCS_AUTHORIZATION``."""
    return "PADDOCK_" + "_".join(re.sub(r"[^A-Za-z0-9]+", "_", part).upper() for part in parts)


def mcp_url_env(skill: str) -> str:
    """The variable the harnesses' MCP config reads a server's URL from."""
    return env_name("mcpurl", skill)


def mcp_url_value(url: str) -> str:
    """A server's URL as that variable holds it: a quote or backslash percent-encoded (Codex
    reads it inside a TOML string; no URL holds them unencoded)."""
    return url.replace("\\", "%5C").replace('"', "%22")


def render_agents_md(spec: WorkspaceSpec) -> str | None:
    """AGENTS.md: the instructions, then a "Workspace scripts" section listing ``scripts``."""
    if spec.instructions is None and not spec.scripts:
        return None
    text = (spec.instructions or "").rstrip() + "\n"
    if spec.scripts:
        text += "\n## Workspace scripts\n\nRun these from the workspace root:\n\n"
        text += "".join(f"- `{name}`: `{command}`\n" for name, command in spec.scripts.items())
    return text.lstrip("\n")


def render_skill_md(name: str, skill: AgentSkill) -> str:
    description = json.dumps(skill.description)  # a JSON string is valid YAML, quotes and all
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{skill.instructions.rstrip()}\n"


def _mcp_headers(
    skill_name: str, mcp: McpSkill, projection: Projection
) -> dict[str, tuple[str, str | None]]:
    """Header name -> (literal value or "", env var holding the secret part or None)."""
    headers: dict[str, tuple[str, str | None]] = {}
    for header in mcp.headers:
        prefix = "Bearer " if header.bearer else ""
        if header.secret_key_ref is not None:
            var = env_name("mcp", skill_name, header.name)
            projection.secret_env[var] = header.secret_key_ref
            projection.gateway_held.add(var)
            headers[header.name] = (prefix, var)
        else:
            headers[header.name] = (prefix + (header.value or ""), None)
    return headers


def _dump_json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


Servers = dict[str, tuple[str, dict[str, tuple[str, str | None]]]]  # name -> url, headers


def _mcp_by_harness(servers: Servers, held: bool = False) -> dict[str, dict[str, Any]]:
    """The MCP servers in each harness's own config format (name -> server), the URL and the
    secret parts as references to env vars (Codex's URL is set by its run: ``harness.codex``).
    ``held``: without the secret headers, which a gateway adds. A variable that is not set
    (a header the gateway holds) is empty: Claude Code would refuse its config otherwise."""
    claude: dict[str, Any] = {}
    gemini: dict[str, Any] = {}
    opencode: dict[str, Any] = {}
    codex: dict[str, Any] = {}
    for name, (url, given) in servers.items():
        headers = {h: (v, var) for h, (v, var) in given.items() if not (held and var)}
        referenced = {h: v + (f"${{{var}}}" if var else "") for h, (v, var) in headers.items()}
        claude[name] = {
            "type": "http",
            "url": f"${{{mcp_url_env(name)}}}",
            "headers": {h: v + (f"${{{var}:-}}" if var else "") for h, (v, var) in headers.items()},
        }
        gemini[name] = {"httpUrl": f"${{{mcp_url_env(name)}}}", "headers": referenced}
        opencode[name] = {
            "type": "remote",
            "url": f"{{env:{mcp_url_env(name)}}}",
            "enabled": True,
            "headers": {
                h: v + (f"{{env:{var}}}" if var else "") for h, (v, var) in headers.items()
            },
        }
        server: dict[str, Any] = {"url": url}
        literal = {h: v for h, (v, var) in headers.items() if var is None}
        from_env = {h: var for h, (v, var) in headers.items() if var is not None and not v}
        bearer = [var for h, (v, var) in headers.items() if var is not None and v == "Bearer "]
        if literal:
            server["http_headers"] = literal
        if from_env:
            server["env_http_headers"] = from_env
        if bearer:
            server["bearer_token_env_var"] = bearer[0]
        codex[name] = server
    return {"claude-code": claude, "codex": codex, "gemini": gemini, "opencode": opencode}


def toml_value(value: object) -> str:
    """A string or a table of strings as a TOML value (inline), as Codex's ``-c`` reads it."""
    if isinstance(value, dict):
        pairs = ", ".join(f"{_toml_string(k)} = {_toml_string(v)}" for k, v in value.items())
        return f"{{ {pairs} }}"
    return _toml_string(str(value))


def _mcp_configs(servers: Servers) -> dict[str, str]:
    """The MCP server list as each harness's config file."""
    by_harness = _mcp_by_harness(servers)
    codex_lines: list[str] = []
    for name, server in by_harness["codex"].items():
        codex_lines.append(f"[mcp_servers.{_toml_string(name)}]")
        codex_lines += [f"{key} = {toml_value(value)}" for key, value in server.items()]
        codex_lines.append("")
    return {
        "claude-mcp.json": _dump_json({"mcpServers": by_harness["claude-code"]}),
        "gemini-settings.json": _dump_json({"mcpServers": by_harness["gemini"]}),
        "opencode.json": _dump_json({"mcp": by_harness["opencode"]}),
        "codex-config.toml": "\n".join(codex_lines),
    }


def mcp_servers(spec: WorkspaceSpec, held: bool = False) -> dict[str, dict[str, Any]]:
    """The Workspace's MCP servers in each harness's config format, by harness name, for the
    runs that carry them themselves instead of reading the workspace's config files (which
    the agent can write, or which the CLI does not trust). ``held``: an egress gateway holds
    their secret headers (the run's routes to them add them)."""
    servers: Servers = {}
    for skill in spec.skills:
        if skill.mcp is not None:
            servers[skill.name] = (skill.mcp.url, _mcp_headers(skill.name, skill.mcp, Projection()))
    return _mcp_by_harness(servers, held)


def agent_skills(spec: WorkspaceSpec) -> dict[str, str]:
    """Each agent skill's SKILL.md, by name."""
    return {s.name: render_skill_md(s.name, s.agent) for s in spec.skills if s.agent is not None}


def _project_mcp(servers: Servers, projection: Projection) -> None:
    """Each harness's MCP config file, installed where the repository has none."""
    for name, text in _mcp_configs(servers).items():
        projection.files[f"{HARNESS_DIR}/{name}"] = text
    projection.harness_files = {
        ".mcp.json": "claude-mcp.json",
        ".gemini/settings.json": "gemini-settings.json",
        ".codex/config.toml": "codex-config.toml",
        "opencode.json": "opencode.json",
    }


def render_projection(spec: WorkspaceSpec) -> Projection:
    """Everything the ``project`` init container puts into the workspace for ``spec``."""
    projection = Projection()
    agents_md = render_agents_md(spec)
    if agents_md is not None:
        projection.files["AGENTS.md"] = agents_md

    servers: Servers = {}
    for skill in spec.skills:
        if skill.agent is not None:
            text = render_skill_md(skill.name, skill.agent)
            projection.files[f".claude/skills/{skill.name}/SKILL.md"] = text
            projection.files[f".codex/skills/{skill.name}/SKILL.md"] = text
            projection.files[f".gemini/skills/{skill.name}/SKILL.md"] = text
        elif skill.file is not None:
            projection.files[skill.file.path] = skill.file.content
        elif skill.git is not None:
            token_env = None
            if skill.git.secret_ref is not None:
                token_env = env_name("skill", skill.name, "token")
                projection.secret_env[token_env] = skill.git.secret_ref
            projection.git_checkouts.append(
                GitCheckout(
                    name=skill.name,
                    repo=skill.git.repo,
                    ref=skill.git.ref,
                    path=skill.git.into or f"{PADDOCK_DIR}/skills/{skill.name}",
                    token_env=token_env,
                )
            )
        elif skill.mcp is not None:
            servers[skill.name] = (skill.mcp.url, _mcp_headers(skill.name, skill.mcp, projection))
            projection.env[mcp_url_env(skill.name)] = mcp_url_value(str(skill.mcp.url))

    if any(skill.git and not skill.git.into for skill in spec.skills):
        projection.warnings.append(
            f"git skills are cloned into {PADDOCK_DIR}/skills/<name>, where no harness loads "
            "skills from: set `into` to a harness's skills directory (such as "
            ".claude/skills/<name>) for it to load one"
        )
    if servers:
        _project_mcp(servers, projection)
    if spec.plugins:
        plugins = {
            f"{p.name}@{p.marketplace}" if p.marketplace else p.name: True for p in spec.plugins
        }
        projection.files[f"{HARNESS_DIR}/claude-settings.json"] = _dump_json(
            {"enabledPlugins": plugins}
        )
        projection.warnings.append(
            "plugins are not loaded by any harness yet: their list is written to "
            f"{HARNESS_DIR}/claude-settings.json, which no run reads"
        )
    return projection
