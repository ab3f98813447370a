"""Pointing each real agent CLI at the scripted model server: the run fields (env, the key
from a Secret, the model)."""

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
    from a Secret. The CLIs are in the kwok pod's "image" (its PATH), as in the sandbox image."""
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
        # Codex ignores OPENAI_BASE_URL itself: Paddock makes it the run's provider.
        key_name = "CODEX_API_KEY"
        env |= {"OPENAI_BASE_URL": f"{url}/v1"}
    return {
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "secrets": [{"name": key_name, "secretKeyRef": {"name": "llm", "key": "key"}}],
        "model": MODELS[harness],
    }
