"""Where a harness sends its model requests when the run's key stays with the egress gateway:
the provider each harness speaks to, and the environment (and, for Codex, the session flags)
that point it at the gateway's model route with the run's token in place of the key."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from paddock.api.agentrun import AgentRunSpec, Harness
from paddock.render.projections import toml_value


class Provider(StrEnum):
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    GOOGLE = "google"


PUBLIC_APIS = {
    Provider.ANTHROPIC: "https://api.anthropic.com",
    Provider.OPENAI: "https://api.openai.com",
    Provider.GOOGLE: "https://generativelanguage.googleapis.com",
}
FIXED = {
    Harness.CLAUDE_CODE: Provider.ANTHROPIC,
    Harness.CODEX: Provider.OPENAI,
    Harness.GEMINI: Provider.GOOGLE,
}
# OpenCode's providers that read their base URL and key from the environment.
OPENCODE = (Provider.ANTHROPIC, Provider.OPENAI)
CODEX_PROVIDER = "paddock"


@dataclass(frozen=True)
class ModelRoute:
    """The gateway's model route as the sandbox reaches it (``http://HOST:PORT``) and the run's
    token, which the gateway swaps for the key."""

    url: str
    token: str


def provider_of(spec: AgentRunSpec) -> Provider | str:
    """The provider a run's harness speaks to, or why it has none the gateway can stand in for."""
    harness = Harness(spec.harness)
    if harness in FIXED:
        return FIXED[harness]
    if harness == Harness.OPENCODE:
        prefix = (spec.model or "").partition("/")[0]
        if prefix in OPENCODE:
            return Provider(prefix)
        return (
            f"opencode's model {spec.model or '(unset)'} names no provider the gateway's model "
            "route serves (anthropic/... or openai/...)"
        )
    return f"harness {harness} calls no model"


def upstream(spec: AgentRunSpec, provider: Provider) -> str:
    """The API the gateway forwards to: the run's baseURL, else the provider's public API."""
    given = spec.model_key.base_url if spec.model_key is not None else None
    return (given or PUBLIC_APIS[provider]).rstrip("/")


def key_env(spec: AgentRunSpec, provider: Provider) -> str:
    """The variable the harness reads its key from (the key itself, without a gateway)."""
    if spec.harness == Harness.CODEX:
        return "CODEX_API_KEY"
    return {
        Provider.ANTHROPIC: "ANTHROPIC_API_KEY",
        Provider.OPENAI: "OPENAI_API_KEY",
        Provider.GOOGLE: "GEMINI_API_KEY",
    }[provider]


def routed_env(spec: AgentRunSpec, provider: Provider, route: ModelRoute) -> dict[str, str]:
    """The harness's environment pointing it at the route, the token as its key. (Codex's
    base URL is a session flag: ``codex_options``.)"""
    env = {key_env(spec, provider): route.token}
    if spec.harness == Harness.CLAUDE_CODE:
        env["ANTHROPIC_BASE_URL"] = route.url
    elif spec.harness == Harness.GEMINI:
        env["GOOGLE_GEMINI_BASE_URL"] = route.url
    elif spec.harness == Harness.OPENCODE:
        base = "ANTHROPIC_BASE_URL" if provider == Provider.ANTHROPIC else "OPENAI_BASE_URL"
        env[base] = f"{route.url}/v1"
    return env


def codex_options(base_url: str, env_key: str = "CODEX_API_KEY") -> list[str]:
    """Codex's provider at ``base_url`` (the gateway's route's ``/v1``, or a run's
    ``OPENAI_BASE_URL``) as session flags (no config file overrides them): Codex reads a
    base URL from its config only, and its config home is the run's own."""
    provider = {
        "name": CODEX_PROVIDER,
        "base_url": base_url,
        "env_key": env_key,
        "wire_api": "responses",
    }
    return [
        "-c",
        f"model_provider={toml_value(CODEX_PROVIDER)}",
        "-c",
        f"model_providers.{CODEX_PROVIDER}={toml_value(provider)}",
    ]
