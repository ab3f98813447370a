"""What the ``project`` init container writes into the workspace: AGENTS.md, skills, and each
harness's MCP and plugin configuration.

Secret values never appear here: an MCP header taken from a Secret is written as a reference to
an environment variable, which the sandbox container gets from the Secret (``secret_env``), and
each harness expands at start.
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


def env_name(*parts: str) -> str:
    """``("mcp", "docs", "Authorization")`` -> ``PADDOCK_MCP_DOCS_AUTHORIZATION``."""
    return "PADDOCK_" + "_".join(re.sub(r"[^A-Za-z0-9]+", "_", part).upper() for part in parts)


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
            headers[header.name] = (prefix, var)
        else:
            headers[header.name] = (prefix + (header.value or ""), None)
    return headers


def _dump_json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _mcp_configs(
    servers: dict[str, tuple[str, dict[str, tuple[str, str | None]]]],
) -> dict[str, str]:
    """The MCP server list in each harness's own format; secret parts as env references."""
    claude: dict[str, object] = {}
    gemini: dict[str, object] = {}
    opencode: dict[str, object] = {}
    codex_lines: list[str] = []
    for name, (url, headers) in servers.items():
        claude[name] = {
            "type": "http",
            "url": url,
            "headers": {h: v + (f"${{{var}}}" if var else "") for h, (v, var) in headers.items()},
        }
        gemini[name] = {
            "httpUrl": url,
            "headers": {h: v + (f"${{{var}}}" if var else "") for h, (v, var) in headers.items()},
        }
        opencode[name] = {
            "type": "remote",
            "url": url,
            "enabled": True,
            "headers": {
                h: v + (f"{{env:{var}}}" if var else "") for h, (v, var) in headers.items()
            },
        }
        codex_lines += [f"[mcp_servers.{_toml_string(name)}]", f"url = {_toml_string(url)}"]
        literal = {h: v for h, (v, var) in headers.items() if var is None}
        from_env = {h: var for h, (v, var) in headers.items() if var is not None and not v}
        bearer = [var for h, (v, var) in headers.items() if var is not None and v == "Bearer "]
        if literal:
            pairs = ", ".join(f"{_toml_string(h)} = {_toml_string(v)}" for h, v in literal.items())
            codex_lines.append(f"http_headers = {{ {pairs} }}")
        if from_env:
            pairs = ", ".join(f"{_toml_string(h)} = {_toml_string(v)}" for h, v in from_env.items())
            codex_lines.append(f"env_http_headers = {{ {pairs} }}")
        if bearer:
            codex_lines.append(f"bearer_token_env_var = {_toml_string(bearer[0])}")
        codex_lines.append("")
    return {
        "claude-mcp.json": _dump_json({"mcpServers": claude}),
        "gemini-settings.json": _dump_json({"mcpServers": gemini}),
        "opencode.json": _dump_json({"mcp": opencode}),
        "codex-config.toml": "\n".join(codex_lines),
    }


def mcp_servers(spec: WorkspaceSpec) -> dict[str, dict[str, Any]]:
    """The Workspace's MCP servers in the config format of the harnesses that, gated, do not
    read the workspace's files (OpenCode's ``mcp``, Gemini CLI's ``mcpServers``), by harness
    name: their gated configs carry them instead."""
    projection = render_projection(spec)
    found: dict[str, dict[str, Any]] = {}
    for harness, name, key in (
        ("opencode", "opencode.json", "mcp"),
        ("gemini", "gemini-settings.json", "mcpServers"),
    ):
        text = projection.files.get(f"{HARNESS_DIR}/{name}")
        found[harness] = json.loads(text)[key] if text else {}
    return found


def render_projection(spec: WorkspaceSpec) -> Projection:
    """Everything the ``project`` init container puts into the workspace for ``spec``."""
    projection = Projection()
    agents_md = render_agents_md(spec)
    if agents_md is not None:
        projection.files["AGENTS.md"] = agents_md

    servers: dict[str, tuple[str, dict[str, tuple[str, str | None]]]] = {}
    for skill in spec.skills:
        if skill.agent is not None:
            text = render_skill_md(skill.name, skill.agent)
            projection.files[f".claude/skills/{skill.name}/SKILL.md"] = text
            projection.files[f".codex/skills/{skill.name}/SKILL.md"] = text
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

    if any(skill.agent or skill.git for skill in spec.skills):
        projection.warnings.append(
            "skills are projected for Claude Code and Codex only; OpenCode and Gemini CLI "
            "do not load them"
        )
    if servers:
        for name, text in _mcp_configs(servers).items():
            projection.files[f"{HARNESS_DIR}/{name}"] = text
        projection.harness_files = {
            ".mcp.json": "claude-mcp.json",
            ".gemini/settings.json": "gemini-settings.json",
            ".codex/config.toml": "codex-config.toml",
            "opencode.json": "opencode.json",
        }
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
