"""What a delivery runs in the sandbox, as the sandbox's own user: make a commit of the work
left uncommitted, then hand over a git bundle of the run's commits. Nothing it prints is
trusted: the operator reads the bundle into a repository of its own and checks it there.

The commit message comes on stdin (base64, one line), never in the script or its arguments."""

from __future__ import annotations

import base64
import re

from paddock.api.agentrun import AgentRunSpec
from paddock.render.sandbox_shell import END_PROCESSES, OWN_GIT

DELIVER_REF = "refs/paddock/deliver"
NOTHING = 4  # the bundle script's exit code when the run left nothing new

# Both read the workspace's repository as data, with Paddock's own git, after ending what
# processes the run left (sandbox_shell.py): nothing the agent wrote runs, or is running.
SNAPSHOT = r"""
set -euo pipefail
cd "${PADDOCK_WORKSPACE:-/workspace}"
paddock_end_processes
own=$(mktemp -d)
trap 'rm -rf "$own"' EXIT
if ! paddock_git_dir "$PWD" "$own/git" || ! paddock_git rev-parse --verify -q HEAD >/dev/null
then
  echo "the workspace holds no git commit that Paddock can read" >&2
  exit 3
fi
IFS= read -r encoded
printf '%s' "$encoded" | base64 -d > "$own/message"
paddock_git read-tree HEAD
paddock_git_gitlinks_as_they_are
paddock_git_no_nested_repositories
paddock_git add -A
tree="$(paddock_git write-tree)"
commit="$(paddock_git rev-parse HEAD)"
if [ "$tree" != "$(paddock_git rev-parse 'HEAD^{tree}')" ]; then
  commit="$(paddock_git commit-tree "$tree" -p HEAD < "$own/message")"
fi
echo "commit $commit"
"""

# The commits the sandbox did not get from its clone: everything but its remote-tracking
# branches and tags. (Whatever it claims, the operator checks that what the bundle needs is in
# the base branch's history on the forge.) $1: the commit the snapshot made.
BUNDLE = r"""
set -euo pipefail
cd "${PADDOCK_WORKSPACE:-/workspace}"
own=$(mktemp -d)
trap 'rm -rf "$own"' EXIT
paddock_git_dir "$PWD" "$own/git"
paddock_git update-ref "$1" "$2"
if [ -z "$(paddock_git rev-list -n 1 "$1" --not --remotes --tags)" ]; then
  echo "no commit and no change since the clone" >&2
  exit 4
fi
paddock_git bundle create --quiet - "$1" --not --remotes --tags
"""
SNAPSHOT = OWN_GIT + END_PROCESSES + SNAPSHOT
BUNDLE = OWN_GIT + BUNDLE
COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def snapshot_argv() -> list[str]:
    return ["bash", "-c", SNAPSHOT, "paddock-deliver"]


def bundle_argv(commit: str) -> list[str]:
    if not COMMIT.match(commit):
        raise ValueError(f"not a commit id: {commit!r}")
    return ["bash", "-c", BUNDLE, "paddock-bundle", DELIVER_REF, commit]


def snapshot_payload(message: str) -> str:
    return base64.b64encode(message.encode()).decode() + "\n"


def parse_snapshot(stdout: str) -> str | None:
    """The commit the snapshot made (or found), if it printed one."""
    for line in stdout.splitlines():
        if line.startswith("commit "):
            commit = line.removeprefix("commit ").strip()
            return commit if COMMIT.match(commit) else None
    return None


def commit_message(spec: AgentRunSpec, run: str) -> str:
    """The spec's, else the task's first line (the prompt's, or the command's), with a line
    naming the run."""
    if spec.deliver is not None and spec.deliver.commit_message:
        return spec.deliver.commit_message
    task = (spec.prompt or spec.command or "").strip().splitlines()
    first = task[0][:72] if task else f"The work of run {run}"
    return f"{first}\n\nDelivered by Paddock from AgentRun {run}.\n"
