"""Render functions of a sandbox, against golden files and the properties that matter."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
from typing import Any

import pytest
import yaml

from paddock.agentruns.inputs import workspace_context
from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.harness import claude_code, codex, gemini, opencode
from paddock.harness.base import WorkspaceContext
from paddock.render.network_policy import (
    ClusterNetwork,
    render_baseline_network_policy,
    render_network_policy,
)
from paddock.render.projections import mcp_servers, render_projection
from paddock.render.sandbox import SandboxInputs, render_sandbox
from paddock.render.workspace_hash import workspace_hash
from paddock.vocab import names
from support.golden import assert_golden

SECRET_VALUE = "ghp_this-is-a-secret-value-0123456789"

WORKSPACE = WorkspaceSpec.model_validate(
    {
        "source": {
            "git": {
                "url": "https://github.com/example/app.git",
                "ref": "main",
                "secretRef": {"name": "git", "key": "token"},
            }
        },
        "setup": ["cd /workspace", {"parallel": ["make deps", "make assets"]}],
        "scripts": {"test": "make test", "lint": "make lint"},
        "env": [{"name": "CI", "value": "true"}],
        "secrets": [{"name": "NPM_TOKEN", "secretKeyRef": {"name": "npm", "key": "token"}}],
        "instructions": "Keep changes small.",
        "skills": [
            {"name": "style", "agent": {"description": "Style rules", "instructions": "Be terse."}},
            {"name": "notes", "file": {"path": "docs/NOTES.md", "content": "notes\n"}},
            {
                "name": "tools",
                "git": {
                    "repo": "https://github.com/example/skills.git",
                    "secretRef": {"name": "git", "key": "token"},
                },
            },
            {
                "name": "docs",
                "mcp": {
                    "url": "https://mcp.example.com/mcp",
                    "headers": [
                        {
                            "name": "Authorization",
                            "bearer": True,
                            "secretKeyRef": {"name": "mcp", "key": "token"},
                        },
                        {"name": "X-Team", "value": "platform"},
                    ],
                },
            },
        ],
        "plugins": [{"name": "review", "marketplace": "acme"}],
    }
)
SANDBOX = SandboxSpec.model_validate(
    {
        "workspaceRef": {"name": "app"},
        "runtimeClassName": "gvisor",
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "nodeSelector": {"pool": "agents"},
        "tolerations": [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}],
        "storage": {"size": "5Gi", "storageClassName": "fast"},
    }
)
INPUTS = SandboxInputs(
    name="app-1",
    namespace="team",
    sandbox=SANDBOX,
    workspace=WORKSPACE,
    image="registry.example.com/app-sandbox:1.2",
    workspace_hash=workspace_hash(WORKSPACE, "registry.example.com/app-sandbox:1.2"),
)


@pytest.fixture
def rendered() -> dict[str, dict[str, Any]]:
    return render_sandbox(INPUTS, prepared=False)


def test_pod_matches_golden(rendered: dict[str, dict[str, Any]]) -> None:
    assert_golden("sandbox-pod.yaml", rendered["Pod"])


def test_where_a_gateway_holds_them_the_pod_has_no_mcp_secret_header() -> None:
    """With a gateway that serves routes, the MCP server's secret header is the gateway's:
    no secretKeyRef of it in the pod; the server's URL is in its env either way."""

    def env(held: bool) -> dict[str, Any]:
        pod = render_sandbox(dataclasses.replace(INPUTS, mcp_held=held), prepared=False)["Pod"]
        (main,) = [c for c in pod["spec"]["containers"] if c["name"] == "sandbox"]
        return {e["name"]: e.get("value", e.get("valueFrom")) for e in main["env"]}

    for held in (False, True):
        assert env(held)["PADDOCK_MCPURL_DOCS"] == "https://mcp.example.com/mcp"
    assert "secretKeyRef" in env(False)["PADDOCK_MCP_DOCS_AUTHORIZATION"]
    # A $ in a URL stays itself: the kubelet would put an earlier variable's value in $(NAME).
    odd = WorkspaceSpec.model_validate(
        {"skills": [{"name": "m", "mcp": {"url": 'https://h/$(X)"'}}]}
    )
    pod = render_sandbox(dataclasses.replace(INPUTS, workspace=odd), prepared=False)["Pod"]
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == "sandbox"]
    assert {"name": "PADDOCK_MCPURL_M", "value": "https://h/$$(X)%22"} in main["env"]
    assert "PADDOCK_MCP_DOCS_AUTHORIZATION" not in env(True)
    assert "PADDOCK_MCP_DOCS_AUTHORIZATION" not in env(True).get("PADDOCK_SECRET_ENV", "")


def test_pvc_matches_golden(rendered: dict[str, dict[str, Any]]) -> None:
    assert_golden("sandbox-pvc.yaml", rendered["PersistentVolumeClaim"])


def test_files_configmap_matches_golden(rendered: dict[str, dict[str, Any]]) -> None:
    assert_golden("sandbox-files-configmap.yaml", rendered["ConfigMap"])


def test_network_policy_matches_golden() -> None:
    policy = SandboxPolicySpec.model_validate(
        {"network": {"egress": [{"cidrs": ["10.1.0.0/16"], "ports": [{"port": 5432}]}]}}
    )
    cluster = ClusterNetwork(addresses=frozenset({"203.0.113.7", "10.0.0.5"}))
    rendered = render_network_policy(
        names.policy_network_policy_name("strict"), "team", policy, cluster
    )
    assert_golden("sandbox-network-policy.yaml", rendered)


def test_the_baseline_isolates_every_sandbox_pod_of_its_namespace() -> None:
    baseline = render_baseline_network_policy("team")
    assert baseline["metadata"]["name"] == names.BASELINE_NETWORK_POLICY
    assert baseline["spec"]["podSelector"] == {
        "matchExpressions": [{"key": names.SANDBOX_LABEL, "operator": "Exists"}]
    }
    assert baseline["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert baseline["spec"]["ingress"] == baseline["spec"]["egress"] == []


@pytest.mark.parametrize(
    ("policy", "namespace", "name"),
    [
        ("strict", None, "strict.paddock-policy"),
        ("base", "platform", "base.platform.paddock-default"),
        (
            "p" * 250,
            None,
            "p" * 225 + "-" + hashlib.sha256(b"p" * 250).hexdigest()[:12] + ".paddock-policy",
        ),
    ],
)
def test_a_policys_shared_fence_is_named_apart_from_every_other_fence(
    policy: str, namespace: str | None, name: str
) -> None:
    made = names.policy_network_policy_name(policy, namespace)
    assert made == name
    assert len(made) <= 253
    assert not made.endswith("-egress")  # a sandbox's own
    assert len(names.label_value(made)) <= 63


def test_pod_is_restricted_and_has_no_service_account_token(
    rendered: dict[str, dict[str, Any]],
) -> None:
    spec = rendered["Pod"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["initContainers"] + spec["containers"]:
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
    assert spec["runtimeClassName"] == "gvisor"
    assert spec["nodeSelector"] == {"pool": "agents"}


def test_init_containers_run_clone_project_setup_in_order(
    rendered: dict[str, dict[str, Any]],
) -> None:
    names = [c["name"] for c in rendered["Pod"]["spec"]["initContainers"]]
    assert names == ["clone", "project", "setup", "gate"]  # the sidecar starts after setup


def test_the_gate_sidecar_is_another_user_whose_volumes_the_agent_cannot_write(
    rendered: dict[str, dict[str, Any]],
) -> None:
    spec = rendered["Pod"]["spec"]
    gate = spec["initContainers"][-1]
    assert gate["restartPolicy"] == "Always"  # a native sidecar: runs as long as the pod
    pod_user = spec["securityContext"]["runAsUser"]
    assert gate["securityContext"]["runAsUser"] not in (0, pod_user)
    assert gate["securityContext"]["readOnlyRootFilesystem"] is True
    gate_mounts = {m["mountPath"]: m for m in gate["volumeMounts"]}
    assert set(gate_mounts) == {"/paddock/control", "/paddock/gate", "/paddock/run"}
    assert gate_mounts["/paddock/run"]["readOnly"] is True  # the journals it follows; no HOME
    assert not any("valueFrom" in e for e in gate["env"])  # and no secret
    main = spec["containers"][0]
    main_mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
    assert main_mounts["/paddock/control"]["readOnly"] is True
    assert "/paddock/gate" not in main_mounts
    # The shell's startup files in HOME are read-only files of the pod's ConfigMap.
    for name in (".bashrc", ".bash_profile", ".profile"):
        mount = main_mounts[f"/home/paddock/{name}"]
        assert mount["readOnly"] is True
        assert mount["name"] == "files"
        assert mount["subPath"] in rendered["ConfigMap"]["data"]


def test_prepared_pod_runs_no_init_container() -> None:
    pod = render_sandbox(INPUTS, prepared=True)["Pod"]
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["gate"]  # the sidecar only
    assert pod["metadata"]["annotations"]["paddock.dev/prepared"] == "true"


def test_home_and_run_volumes_are_not_the_workspace(rendered: dict[str, dict[str, Any]]) -> None:
    main = rendered["Pod"]["spec"]["containers"][0]
    mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in rendered["Pod"]["spec"]["volumes"]}
    assert "persistentVolumeClaim" in volumes[mounts["/workspace"]]
    assert "emptyDir" in volumes[mounts["/home/paddock"]]
    assert "emptyDir" in volumes[mounts["/paddock/run"]]
    assert {"name": "HOME", "value": "/home/paddock"} in main["env"]


def test_secrets_reach_containers_only_as_secret_key_refs(
    rendered: dict[str, dict[str, Any]],
) -> None:
    pod = rendered["Pod"]
    env = {e["name"]: e for c in pod["spec"]["containers"] for e in c["env"]}
    assert env["NPM_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "npm", "key": "token"}
    assert env["PADDOCK_MCP_DOCS_AUTHORIZATION"]["valueFrom"]["secretKeyRef"]["name"] == "mcp"
    clone = pod["spec"]["initContainers"][0]
    token = next(e for e in clone["env"] if e["name"] == "PADDOCK_GIT_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "git", "key": "token"}
    # The URL and the command lines carry no credential.
    assert all("@" not in arg for c in pod["spec"]["initContainers"] for arg in c["command"])


def test_mcp_secret_headers_and_urls_are_env_references_in_every_harness_config() -> None:
    projection = render_projection(WORKSPACE)
    files = projection.files
    claude = json.loads(files[".paddock/harness/claude-mcp.json"])
    assert claude["mcpServers"]["docs"] == {
        "type": "http",
        "url": "${PADDOCK_MCPURL_DOCS}",
        # (unset where a gateway holds it: empty, which Claude Code takes)
        "headers": {
            "Authorization": "Bearer ${PADDOCK_MCP_DOCS_AUTHORIZATION:-}",
            "X-Team": "platform",
        },
    }
    gemini = json.loads(files[".paddock/harness/gemini-settings.json"])
    assert gemini["mcpServers"]["docs"]["httpUrl"] == "${PADDOCK_MCPURL_DOCS}"
    assert projection.env == {"PADDOCK_MCPURL_DOCS": "https://mcp.example.com/mcp"}
    assert projection.gateway_held == {"PADDOCK_MCP_DOCS_AUTHORIZATION"}
    opencode = json.loads(files[".paddock/harness/opencode.json"])
    assert opencode["mcp"]["docs"]["headers"]["Authorization"] == (
        "Bearer {env:PADDOCK_MCP_DOCS_AUTHORIZATION}"
    )
    codex = files[".paddock/harness/codex-config.toml"]
    assert 'bearer_token_env_var = "PADDOCK_MCP_DOCS_AUTHORIZATION"' in codex
    assert 'http_headers = { "X-Team" = "platform" }' in codex


def _context(harness: str) -> WorkspaceContext:
    return workspace_context(WORKSPACE, harness)


def _spec(harness: str) -> AgentRunSpec:
    return AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "b"}, "harness": harness, "prompt": "p"}
    )


def test_a_gated_run_carries_the_workspaces_instructions_skills_and_mcp_servers_itself() -> None:
    # Gated, no CLI reads the workspace's config files (the agent's to write) for them.
    claude = claude_code.gated(_spec("claude-code"), SandboxPolicySpec(), _context("claude-code"))
    assert claude.files[claude_code.INSTRUCTIONS].startswith("Keep changes small.")
    assert "--append-system-prompt-file" in claude.script
    mcp = json.loads(claude.files[claude_code.MCP_CONFIG])["mcpServers"]["docs"]
    assert mcp["headers"]["Authorization"] == "Bearer ${PADDOCK_MCP_DOCS_AUTHORIZATION:-}"
    assert "mcp__docs" in json.loads(claude.files[claude_code.SETTINGS])["permissions"]["allow"]
    assert "--plugin-dir" in claude.script
    assert f"{claude_code.PLUGIN}/skills/style/SKILL.md" in claude.files
    assert "Be terse." in "".join(claude.files.values())

    config = json.loads(
        opencode.gated(_spec("opencode"), SandboxPolicySpec(), _context("opencode")).files[
            opencode.CONFIG
        ]
    )
    assert config["mcp"]["docs"]["url"] == "{env:PADDOCK_MCPURL_DOCS}"
    assert config["mcp"]["docs"]["headers"]["Authorization"] == (
        "Bearer {env:PADDOCK_MCP_DOCS_AUTHORIZATION}"  # a reference, never the secret
    )
    assert config["instructions"] == [f"{opencode.CONTROL_MARK}/{opencode.INSTRUCTIONS}"]

    gated_gemini = gemini.gated(_spec("gemini"), SandboxPolicySpec(), _context("gemini"))
    settings = json.loads(gated_gemini.files[gemini.SETTINGS])
    assert settings["mcpServers"]["docs"]["httpUrl"] == "${PADDOCK_MCPURL_DOCS}"
    assert 'mcpName = "docs"' in gated_gemini.files[gemini.POLICY_FILE]
    assert f"{gemini.SKILLS}/style/SKILL.md" in gated_gemini.files
    assert f'cp -r "$PADDOCK_CONTROL/{gemini.SKILLS}"/. ' in gated_gemini.script

    assert mcp_servers(WorkspaceSpec()) == {
        "claude-code": {}, "codex": {}, "gemini": {}, "opencode": {}
    }  # fmt: skip


def test_codex_is_given_the_workspaces_mcp_servers_as_config_overrides() -> None:
    # Codex reads no untrusted project's .codex/config.toml, gated or not.
    for invocation in (
        codex.invocation(_spec("codex"), _context("codex")),
        codex.gated(_spec("codex"), SandboxPolicySpec(), _context("codex")),
    ):
        assert '-c "mcp_servers.docs.url=\\"${PADDOCK_MCPURL_DOCS}\\""' in invocation.script
        assert (
            'mcp_servers.docs.bearer_token_env_var="PADDOCK_MCP_DOCS_AUTHORIZATION"'
            in invocation.script
        )
    # Where the gateway holds the secret header, the run's config names none.
    held = workspace_context(WORKSPACE, "codex", held=True)
    assert "bearer_token_env_var" not in codex.invocation(_spec("codex"), held).script
    assert "X-Team" in codex.invocation(_spec("codex"), held).script
    claude = workspace_context(WORKSPACE, "claude-code", held=True).mcp["docs"]
    assert claude["headers"] == {"X-Team": "platform"}


def test_codex_reads_the_mcp_servers_url_from_its_runs_environment() -> None:
    """The shell word the script holds becomes the TOML string Codex reads."""
    script = codex.invocation(_spec("codex"), _context("codex")).script
    word = script[script.index('"mcp_servers.docs.url=') :].split(" ", 1)[0]
    done = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True,
        env={"PADDOCK_MCPURL_DOCS": "http://g:1/_route/t/mcp.docs/mcp"},
    )  # fmt: skip
    assert done.stdout == 'mcp_servers.docs.url="http://g:1/_route/t/mcp.docs/mcp"'


def test_agents_md_lists_the_workspace_scripts() -> None:
    agents = render_projection(WORKSPACE).files["AGENTS.md"]
    assert agents.startswith("Keep changes small.\n")
    assert "## Workspace scripts" in agents
    assert "- `test`: `make test`" in agents


def test_harness_limits_are_warnings() -> None:
    warnings = render_projection(WORKSPACE).warnings
    assert any("plugins are not loaded by any harness yet" in w for w in warnings)
    assert any("git skills are cloned into .paddock/skills/<name>" in w for w in warnings)


def test_no_rendered_object_carries_a_secret_value(rendered: dict[str, dict[str, Any]]) -> None:
    # The spec holds references only; nothing rendered can hold a value it never had. This
    # pins that no code path reads a Secret into a manifest.
    assert SECRET_VALUE not in yaml.safe_dump(rendered)


def test_hash_changes_with_setup_and_image_not_with_secret_rotation() -> None:
    base = workspace_hash(WORKSPACE, "img:1")
    changed_setup = WORKSPACE.model_copy(update={"setup": ["make deps"]})
    assert workspace_hash(changed_setup, "img:1") != base
    assert workspace_hash(WORKSPACE, "img:2") != base
    # A rotated secret changes the Secret object, never the spec: the hash stays.
    assert workspace_hash(WorkspaceSpec.model_validate(WORKSPACE.to_api()), "img:1") == base


def test_network_policy_denies_ingress_and_fences_egress() -> None:
    deny = render_network_policy(
        "s",
        "ns",
        SandboxPolicySpec.model_validate({"capabilities": {"network": "deny"}}),
        ClusterNetwork(),
    )
    assert deny["spec"]["ingress"] == []
    [dns] = deny["spec"]["egress"]  # DNS only: nothing else under deny
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    allow = render_network_policy("s", "ns", SandboxPolicySpec(), ClusterNetwork())
    internet = allow["spec"]["egress"][1]["to"][0]["ipBlock"]
    assert internet["cidr"] == "0.0.0.0/0"
    assert "169.254.0.0/16" in internet["except"]
    assert "10.0.0.0/8" in internet["except"]


def test_dns_goes_only_to_the_cluster_dns_pods_and_the_named_resolvers() -> None:
    cluster = ClusterNetwork(
        dns_namespace="dns", dns_pod_labels={"app": "coredns"}, dns_servers=("169.254.20.10",)
    )
    [dns] = render_network_policy(
        "s", "ns", SandboxPolicySpec.model_validate({"capabilities": {"network": "deny"}}), cluster
    )["spec"]["egress"]
    assert dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dns"}},
            "podSelector": {"matchLabels": {"app": "coredns"}},
        },
        {"ipBlock": {"cidr": "169.254.20.10/32"}},
    ]
    no_dns = SandboxPolicySpec.model_validate(
        {"capabilities": {"network": "deny"}, "network": {"dns": False}}
    )
    assert render_network_policy("s", "ns", no_dns, cluster)["spec"]["egress"] == []


def test_allow_leaves_out_the_nodes_and_the_api_server_outside_the_internal_ranges() -> None:
    cluster = ClusterNetwork(
        addresses=frozenset({"192.0.2.2", "10.1.2.3", "198.51.100.9", "2001:db8::1", "fd00::1"})
    )
    egress = render_network_policy("s", "ns", SandboxPolicySpec(), cluster)["spec"]["egress"]
    v4, v6 = (peer["ipBlock"] for peer in egress[1]["to"])
    # 10.1.2.3 and fd00::1 are inside ranges already left out; the others are listed alone.
    assert v4["except"][-2:] == ["192.0.2.2/32", "198.51.100.9/32"]
    assert "10.1.2.3/32" not in v4["except"]
    assert v6["except"][-1] == "2001:db8::1/128"
    assert "fd00::1/128" not in v6["except"]
    # The same addresses in another order render the same policy: no needless patch.
    again = ClusterNetwork(addresses=frozenset(sorted(cluster.addresses, reverse=True)))
    assert render_network_policy("s", "ns", SandboxPolicySpec(), again)["spec"]["egress"] == egress


def test_an_egress_rule_may_name_a_cluster_address() -> None:
    policy = SandboxPolicySpec.model_validate(
        {"network": {"egress": [{"cidrs": ["192.0.2.2/32"], "ports": [{"port": 6443}]}]}}
    )
    cluster = ClusterNetwork(addresses=frozenset({"192.0.2.2"}))
    egress = render_network_policy("s", "ns", policy, cluster)["spec"]["egress"]
    assert egress[-1] == {
        "to": [{"ipBlock": {"cidr": "192.0.2.2/32"}}],
        "ports": [{"protocol": "TCP", "port": 6443}],
    }
