"""The SandboxPolicy engine: shell-aware command evaluation. Pure: no Kubernetes, no kopf."""
