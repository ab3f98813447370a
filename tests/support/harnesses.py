"""Pointing each real agent CLI at the scripted model server: the run fields (env, the key
from a Secret, the model) and, for Codex, its provider in the sandbox's user config."""

from __future__ import annotations

import json
from typing import Any

from support.kube import Cluster
from support.sandboxes import secret

API_KEY = "sk-scripted-0f3b9a-key"
MODELS = {
    "claude-code": "claude-sonnet-4-5",
    "codex": "gpt-5",
    "opencode": "anthropic/claude-sonnet-4-5",
    "gemini": "gemini-2.5-pro",
}


def harness_fields(
    cluster: Cluster, namespace: str, sandbox: str, harness: str, url: str
) -> dict[str, Any]:
    """The run spec fields that point a harness in ``sandbox`` at ``url``, with its key
    from a Secret. The CLIs are in the kwok pod's "image" (its PATH), as in the sandbox image;
    Codex's provider goes in its user config, in the sandbox's HOME."""
    cluster.apply(secret("llm", key=API_KEY), namespace)
    env: dict[str, str] = {}
    if harness == "claude-code":
        key_name = "ANTHROPIC_API_KEY"
        env |= {"ANTHROPIC_BASE_URL": url, "CLAUDE_CODE_MAX_RETRIES": "0"}
    elif harness == "opencode":
        # OpenCode's Anthropic provider, pointed at the same Messages API.
        key_name = "ANTHROPIC_API_KEY"
        provider = {"anthropic": {"options": {"baseURL": f"{url}/v1", "maxRetries": 0}}}
        env |= {"OPENCODE_CONFIG_CONTENT": json.dumps({"provider": provider})}
    elif harness == "gemini":
        key_name = "GEMINI_API_KEY"
        env |= {"GOOGLE_GEMINI_BASE_URL": url}
    else:
        key_name = "CODEX_API_KEY"
        config = (
            'model_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{url}/v1"\n'
            'env_key = "CODEX_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        cluster.kubectl(
            "exec", "-n", namespace, sandbox, "-c", "sandbox", "--", "bash", "-c",
            'mkdir -p "$HOME/.codex" && printf %s "$1" > "$HOME/.codex/config.toml"', "-", config,
        )  # fmt: skip
    return {
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "secrets": [{"name": key_name, "secretKeyRef": {"name": "llm", "key": "key"}}],
        "model": MODELS[harness],
    }
