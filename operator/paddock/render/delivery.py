"""What a delivery runs in the sandbox, as the sandbox's own user: make a commit of the work
left uncommitted, then hand over a git bundle of the run's commits. Nothing it prints is
trusted: the operator reads the bundle into a repository of its own and checks it there.

The commit message comes on stdin (base64, one line), never in the script or its arguments."""

from __future__ import annotations

import base64

from paddock.api.agentrun import AgentRunSpec

DELIVER_REF = "refs/paddock/deliver"
NOTHING = 4  # the bundle script's exit code when the run left nothing new

SNAPSHOT = r"""
set -euo pipefail
cd "${PADDOCK_WORKSPACE:-/workspace}"
if ! git rev-parse --verify -q HEAD >/dev/null; then
  echo "the workspace holds no git commit" >&2
  exit 3
fi
IFS= read -r encoded
message="$(mktemp)"
index="$(mktemp -u)"
trap 'rm -f "$message" "$index"' EXIT
printf '%s' "$encoded" | base64 -d > "$message"
export GIT_INDEX_FILE="$index"
export GIT_AUTHOR_NAME=Paddock GIT_AUTHOR_EMAIL=paddock@noreply.paddock.dev
export GIT_COMMITTER_NAME=Paddock GIT_COMMITTER_EMAIL=paddock@noreply.paddock.dev
git read-tree HEAD
git add -A
tree="$(git write-tree)"
commit="$(git rev-parse HEAD)"
if [ "$tree" != "$(git rev-parse 'HEAD^{tree}')" ]; then
  commit="$(git commit-tree "$tree" -p HEAD -F "$message")"
fi
git update-ref "$1" "$commit"
echo "commit $commit"
"""

# The commits the sandbox did not get from its clone: everything but its remote-tracking
# branches and tags. (Whatever it claims, the operator checks that what the bundle needs is in
# the base branch's history on the forge.)
BUNDLE = r"""
set -euo pipefail
cd "${PADDOCK_WORKSPACE:-/workspace}"
if [ -z "$(git rev-list -n 1 "$1" --not --remotes --tags)" ]; then
  echo "no commit and no change since the clone" >&2
  exit 4
fi
git bundle create --quiet - "$1" --not --remotes --tags
"""


def snapshot_argv() -> list[str]:
    return ["bash", "-c", SNAPSHOT, "paddock-deliver", DELIVER_REF]


def bundle_argv() -> list[str]:
    return ["bash", "-c", BUNDLE, "paddock-bundle", DELIVER_REF]


def snapshot_payload(message: str) -> str:
    return base64.b64encode(message.encode()).decode() + "\n"


def parse_snapshot(stdout: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith("commit "):
            return line.removeprefix("commit ").strip()
    return None


def commit_message(spec: AgentRunSpec, run: str) -> str:
    """The spec's, else the task's first line (the prompt's, or the command's), with a line
    naming the run."""
    if spec.deliver is not None and spec.deliver.commit_message:
        return spec.deliver.commit_message
    task = (spec.prompt or spec.command or "").strip().splitlines()
    first = task[0][:72] if task else f"The work of run {run}"
    return f"{first}\n\nDelivered by Paddock from AgentRun {run}.\n"
