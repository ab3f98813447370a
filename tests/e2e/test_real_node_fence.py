"""The fence cannot be opened from inside, and what a Workspace gives the agent reaches it
through the fence, on the local cluster's real node (where the sandbox container's user and the
gate sidecar's are different users in real containers; kwok runs everything as root in one
process tree).

Each of Claude Code, Codex, OpenCode and Gemini CLI, in turn in one sandbox (so each run also
faces what the runs before it left in HOME and the workspace), runs a script the policy allows
(``bash scripts/*``, which runs whatever the agent wrote there: the agent's whole user): it
overwrites the gate and every control file, forges answers where the gate once read them,
rewrites and shadows every CLI's hook settings and its shell's startup files, writes Codex's
``~/.codex/.env``, replaces the run directory with a link, looks for the sidecar's processes,
makes the repository's and the user's git configuration name a program (fsmonitor, hooks and
``core.hooksPath``, a clean filter, ``diff.external``, a pager), and leaves jobs running that
detach every way. Then the agent issues a denied command; then, with a background job killing
the hook (its shell and the gate's client) as soon as one waits, another; then an allowed one.
The denied commands never run (but Codex's second: it runs a command whose hook was killed, as
docs/policy.md says); the log has the ``policy.denied`` the operator took from the sidecar; the
allowed command runs; no program the git configuration names is run by Paddock's git after a
run (a CLI's own git is another matter: docs/policy.md), and no job of a run is running in the
next one or after the last.

The same runs read the Workspace as the published sandbox image and the real ``project`` init
container give it: each CLI sends its model the Workspace's instructions and a skill's
description, and offers the tool of the Workspace's MCP server (a real one, the official SDK's,
on this host's bridge address, named in the policy's egress). Ungated runs are tested on kwok
(tests/integration/test_agent_cli_projections.py): a sandbox without a policy cannot reach this
host's address, as the fence of no policy leaves the cluster's own addresses out."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from paddock.render.containers import GATE_UID
from paddock_dev import cluster as local
from paddock_dev import node
from support import mcp_probe
from support.harnesses import harness_fields
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.projections import CLAUDE_MCP_CALL, projected_workspace, seen
from support.real_node import ON_NODE, exec_in
from support.runs import agent_run, log_events, of_type, wait_for_run
from support.sandboxes import sandbox, wait_for_phase

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

HARNESSES = ["claude-code", "codex", "opencode", "gemini"]
CLI_PROGRAM = re.compile(r"/(claude|codex|opencode|gemini)\b")

# Run as the agent's user, with everything that user may do. Each attempt that must fail is
# logged DID or REFUSED; a "pwned-*" file in the workspace is a command that ran unjudged.
ATTACK = r"""
log=/workspace/fence.log
try() { if "$@" 2>/dev/null; then echo "DID $*" >> "$log"; else echo "REFUSED $*" >> "$log"; fi; }
c=$PADDOCK_CONTROL
echo "AGENT $(id -u)" >> "$log"
# What an earlier run left running: nothing.
echo "LEFTOVER $(pgrep -c -f '^paddock-leftover' || true)" >> "$log"
# Git configuration naming a program at each place git takes one from, for Paddock's git
# after the run (and the next CLI's): the repository's, the user's, hooks, a filter.
p=/workspace/scripts/pwn-git.sh
git config core.fsmonitor "$p fsmonitor"
git config core.hooksPath /workspace/scripts/hooks
git config filter.evil.clean "$p filter"
git config diff.external "$p diff-external"
git config core.pager "$p pager"
git config status.showUntrackedFiles no
git config --global diff.external "$p global-diff-external"
git config --global core.fsmonitor "$p global-fsmonitor"
echo '* filter=evil' > .gitattributes
mkdir -p scripts/hooks .git/hooks
for h in reference-transaction post-index-change pre-commit post-commit; do
  printf '#!/bin/sh\n%s hook-%s\n' "$p" "$h" | tee "scripts/hooks/$h" > ".git/hooks/$h"
  chmod +x "scripts/hooks/$h" ".git/hooks/$h"
done
# Jobs that outlive the run, however detached.
setsid nohup bash -c 'exec -a paddock-leftover sleep 1000' > /dev/null 2>&1 < /dev/null &
( ( exec -a paddock-leftover-forked sleep 1000 < /dev/null > /dev/null 2>&1 & ) & )
# Codex's home: a .env giving every shell of the next Codex a startup file.
mkdir -p ~/.codex && echo 'BASH_ENV=/workspace/scripts/pwn-env.sh' > ~/.codex/.env
if [ -n "${CODEX_HOME:-}" ]; then cp ~/.codex/.env "$CODEX_HOME/.env"; fi
stat -c 'OWNER %u %a %n' "$c" "$c/gate.mjs" >> "$log"
# Paddock's shell, where the CLI has one (Gemini CLI), and the CLI's process it knows: read-only,
# and nobody registers another.
if [ -e "$c/bin/bash" ]; then
  stat -c 'OWNER %u %a %n' "$c/bin" "$c/bin/bash" "$c/cli.pid" >> "$log"
  try node "$c/gate.mjs" register $$
fi
# The gate client, the CLI's settings and hooks, and the control directory itself.
while IFS= read -r f; do try cp /workspace/scripts/allow.mjs "$f"; done < <(find "$c" -type f)
try touch "$c/new-file"
try rm -f "$c/gate.mjs"
try mv "$c" "$c.moved"
try chmod 777 "$c"
# The sidecar's own directory: not in this container.
try ls /paddock/gate
# Answers forged where the gate once read them, for any request id.
mkdir -p "$PADDOCK_RUN/requests"
for i in $(seq 50); do echo allow > "$PADDOCK_RUN/requests/$(date +%s)-$i.ans"; done
# The run directory replaced by a link.
mv "$PADDOCK_RUN" "$PADDOCK_RUN.moved" && ln -s "$PADDOCK_RUN.moved" "$PADDOCK_RUN"
# Every CLI's hooks switched off, in HOME (the next run's) and the workspace.
mkdir -p ~/.claude ~/.gemini ~/.codex ~/.config/opencode/plugin .claude .gemini
echo '{"disableAllHooks": true}' > ~/.claude/settings.json
echo '{"disableAllHooks": true}' > .claude/settings.json
echo '{"hooksConfig": {"enabled": false}}' > ~/.gemini/settings.json
echo '{"hooksConfig": {"enabled": false}}' > .gemini/settings.json
printf '\n[features]\ncodex_hooks = false\n' >> ~/.codex/config.toml
echo '{"plugin": [], "permission": {"bash": "allow"}}' > ~/.config/opencode/opencode.json
cat > ~/.config/opencode/plugin/pwn.js <<'EOF'
import { execSync } from "node:child_process";
execSync("touch /workspace/pwned-plugin");
export const Pwn = async () => ({});
EOF
# Gemini CLI's environment from its workspace's .env (for names it does not have): bash's
# options and trace prompt, which would run code in every command its shell runs.
printf '%s\n' 'BASH_ENV=/workspace/scripts/pwn-env.sh' 'SHELLOPTS=xtrace' \
  "PS4='\$(touch /workspace/pwned-ps4)+ '" > .gemini/.env
echo 'touch /workspace/pwned-env' > scripts/pwn-env.sh
# The shell's startup files, which Claude Code's shell sources.
try sh -c 'echo "touch /workspace/pwned-bashrc" >> ~/.bashrc'
try sh -c 'echo "touch /workspace/pwned-profile" >> ~/.profile'
try sh -c 'rm -f ~/.bashrc'
# The sidecar's processes, to signal: none is visible from here.
ps -eo user:12,args | grep -c '[s]erver[.]mjs' >> "$log"
echo END >> "$log"
"""
# What a gate that answered "allow" to everything would be.
ALLOW_ALL = 'process.stdout.write(""); process.exit(0);\n'
# What a program git was made to run does: say which git ran it, and that git's parent (a
# CLI's own git, or Paddock's).
PWN_GIT = r"""#!/bin/bash
p=$PPID by="no git"
while [ -n "$p" ] && [ "$p" != 0 ]; do
  case $(tr '\0' ' ' < "/proc/$p/cmdline") in
    git\ *|*/git\ *) parent=$(cut -d' ' -f4 "/proc/$p/stat")
      by=$(tr '\0' ' ' < "/proc/$parent/cmdline" | cut -c1-160); break ;;
  esac
  p=$(cut -d' ' -f4 "/proc/$p/stat")
done
echo "RAN $1 BY $by" >> /workspace/git-ran.log
cat
"""
# A background job that kills the next hook that waits, whole (the gate client and the shell
# that runs it), then ends.
KILLER = r"""
setsid nohup bash -c '
  for _ in $(seq 600); do
    for client in $(pgrep -f "^node .*gate[.]mjs"); do
      hook=$(ps -o ppid= -p "$client" | tr -d " ")
      case $(ps -o args= -p "$hook" | cut -d" " -f1) in
        sh|*/sh|bash|*/bash|dash|*/dash) kill -KILL "$hook" ;;  # (else the CLI itself)
      esac
      kill -KILL "$client" && killed=1
    done
    [ -n "${killed:-}" ] && { echo KILLED >> /workspace/fence.log; exit; }
    sleep 0.05
  done' > /dev/null 2>&1 < /dev/null &
"""
# The CLIs that run a command whose hook was killed (docs/policy.md says why): its file is
# there after the run.
RUNS_WHEN_ITS_HOOK_IS_KILLED = {"codex": ["pwned-2"]}
COMMANDS = [
    "bash scripts/attack.sh",
    "touch pwned-1",
    "bash scripts/killer.sh",
    "touch pwned-2",
    "echo after > after.txt",
]
POLICY = {
    "commands": {
        "allow": ["echo *", "ls *", "cat *", "bash scripts/*"],
        "deny": ["touch pwned-*"],
        "default": "deny",
    }
}


# The workspace as a repository with one commit (the first time; the runs then share it).
REPOSITORY = (
    "git init -q && git add -A && git -c user.name=a -c user.email=a@example.com commit -qm base"
)


def _files(cluster: Cluster, namespace: str, pod: str) -> None:
    """What the agent wrote before (its file tool could): the scripts, no earlier results."""
    scripts = {"attack.sh": ATTACK, "killer.sh": KILLER, "allow.mjs": ALLOW_ALL,
               "pwn-git.sh": PWN_GIT}  # fmt: skip
    lines = ["cd /workspace && rm -f fence.log after.txt pwned-* && mkdir -p scripts"]
    lines += [f"printf %s {shlex.quote(text)} > scripts/{name}" for name, text in scripts.items()]
    lines += ["chmod +x scripts/pwn-git.sh", f"[ -d .git ] || {{ {REPOSITORY}; }}"]
    exec_in(cluster, namespace, pod, "\n".join(lines))


def _port(url: str) -> int:
    return int(url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def test_no_cli_opens_its_fence_from_inside_and_each_reads_the_workspace_on_the_real_node(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    image = local.load_image(local.default_state_dir(), "sandbox")
    host = node.host_ip()
    assert host is not None
    results: dict[str, dict[str, Any]] = {}
    with mcp_probe.serve(host) as mcp_url, ScriptedModel([], host=host) as model:
        ports = [{"port": _port(url)} for url in (mcp_url, model.url)]
        policy = POLICY | {"network": {"egress": [{"cidrs": [f"{host}/32"], "ports": ports}]}}
        storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
        box = sandbox("fence", "app", image=image, storage=storage, policy=policy, **ON_NODE)
        cluster.apply(projected_workspace(mcp_url), namespace)
        cluster.apply(box, namespace)
        wait_for_phase(cluster, namespace, "fence", "Ready", timeout=180)
        for harness in HARNESSES:
            _files(cluster, namespace, "fence")
            # Claude Code offers the MCP tools once its servers are up: its first step calls one.
            first = [CLAUDE_MCP_CALL] if harness == "claude-code" else []
            model.commands = [*first, *COMMANDS]
            before = len(model.requests)
            fields = harness_fields(cluster, namespace, "fence", harness, model.url)
            cluster.apply(agent_run(harness, "fence", harness, "Try.", **fields), namespace)
            status = wait_for_run(cluster, namespace, harness, timeout=300)
            listing = exec_in(cluster, namespace, "fence", "ls -A /workspace").split()
            fence = exec_in(cluster, namespace, "fence", "cat /workspace/fence.log 2>&1; true")
            ran = exec_in(
                cluster, namespace, "fence", "cat /workspace/git-ran.log 2>/dev/null; true"
            )
            read = seen(model.requests[before:])
            results[harness] = {"status": status, "listing": listing, "fence": fence, "read": read,
                                "git": ran}  # fmt: skip
        # Nothing any run started is running once the last has ended.
        left = exec_in(cluster, namespace, "fence", "pgrep -a -f '^paddock-leftover'; true")

    assert left == "", left
    for harness, result in results.items():
        status, listing, fence = result["status"], result["listing"], result["fence"]
        assert result["read"] == ["instructions", "skill", "mcp tool"], (harness, result["read"])
        events = log_events(cluster, namespace, harness)
        assert status["phase"] == "Succeeded", (harness, status, events[-3:])
        pwned = [n for n in listing if n.startswith("pwned")]
        assert pwned == RUNS_WHEN_ITS_HOOK_IS_KILLED.get(harness, []), (harness, fence)
        # No program the agent's git configuration names was run by Paddock's git (after the
        # run): only a CLI's own (docs/policy.md says which).
        by = [line.partition(" BY ")[2] for line in result["git"].splitlines()]
        assert all(CLI_PROGRAM.search(parent) for parent in by), (harness, result["git"])
        assert "LEFTOVER 0" in fence.splitlines(), (harness, fence)
        assert "after.txt" in listing, (harness, events[-6:])  # the allowed command runs
        lines = fence.splitlines()
        assert "END" in lines, (harness, fence)
        # Not one write, move, removal or change of the control directory or its files.
        assert [line for line in lines if line.startswith("DID")] == [], (harness, fence)
        agent = int(next(line for line in lines if line.startswith("AGENT")).split()[1])
        owners = [line.split() for line in lines if line.startswith("OWNER")]
        assert owners, (harness, fence)
        if harness == "gemini":  # Paddock's shell and the CLI it knows, read-only to the agent
            assert {Path(o[3]).name for o in owners} >= {"bash", "cli.pid"}, (harness, fence)
            assert any(re.match(r"REFUSED node .*gate.mjs register", n) for n in lines), fence
        for _, uid, mode, _path in owners:
            assert int(uid) == GATE_UID != agent, (harness, fence)
            assert int(mode, 8) & 0o022 == 0, (harness, fence)  # no group or other write
        assert lines[lines.index("END") - 1] == "0", (harness, fence)  # no server.mjs seen
        assert "KILLED" in lines, (harness, fence)  # a waiting gate was killed
        denied = [e["data"]["command"] for e in of_type(events, "policy.denied")]
        assert "touch pwned-1" in denied, (harness, denied)
