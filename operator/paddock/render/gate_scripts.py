"""The scripts the operator runs in a sandbox pod's sidecar (the ``gate`` container, running
as a user of its own) for each run, and the formats they speak. Pure: text in, text out.

Two volumes of the pod are the sidecar's: ``control`` (``$PADDOCK_CONTROL_DIR``), which the
sandbox container mounts read-only, and ``gate`` (``$PADDOCK_GATE_DIR``), which it does not
mount at all. So nothing there can be written by the agent, whose user is the sandbox
container's, and its processes cannot be signalled by it.

- ``prepare`` (one exec, before the launch) writes the run's control files into
  ``control/runs/<run uid>/``: the harness script, the gate client and the CLI's settings,
  hooks and plugins, which the harness reads from there (a file under ``bin/`` is a program,
  mode 755: Paddock's shell). For a gated run it then starts the
  gate server (``data/gate/server.mjs``), listening on ``gate.sock`` there, with its pending
  requests in ``gate/runs/<run uid>/requests``; it returns once the server listens.
  With ``follow``, the same exec then goes on as the run's follower (``data/gate/follow.mjs``),
  the run's stream (``agentruns/feed.py``); ``follow`` (one exec) starts it again where a
  stream was lost, from the log's offsets.
- ``poll`` (one exec per tick of a gated run that has no stream) returns whether the server
  runs and how many seconds ago it last beat (a stopped one no longer does), and the
  requests waiting for an answer, those after the cursor first.
- ``answer`` (one exec, where there is no stream) writes the operator's answers, which the
  server sends back on the connection each request came on, and on that connection only.
- ``close`` (one exec, when the run ends) stops the server and removes the run's files.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources

PREPARE = r"""set -eu
umask 022
control=$PADDOCK_CONTROL_DIR/runs/$1
private=$PADDOCK_GATE_DIR/runs/$1
run=$1 then=${3:-}
prepared() {
  echo prepared
  # The same exec goes on as the run's follower (a pod whose sidecar does not mount the runs,
  # made by an older operator, has its runs polled instead).
  [ "$then" = follow ] && [ -n "${PADDOCK_RUN_DIR:-}" ] || exit 0
  exec node "$private/follow.mjs" "$PADDOCK_RUN_DIR/$run" "$private" 0 0 launch
}
# A second prepare (the operator stopped before the launch) starts over.
if [ -f "$private/server.pid" ]; then kill "$(cat "$private/server.pid")" 2>/dev/null || true; fi
rm -rf "$control" "$private"
mkdir -p "$control" "$private"
chmod 700 "$private"
while IFS=' ' read -r key name value; do
  case $key in
    file|private)
      case /$name/ in
        */../*|*/./*|//*) echo "paddock: the file name $name is not a relative path" >&2; exit 2 ;;
      esac
      if [ "$key" = file ]; then target=$control/$name; else target=$private/$name; fi
      mkdir -p "${target%/*}"
      printf '%s' "$value" | base64 -d > "$target"
      case $name in bin/*) chmod 755 "$target" ;; esac ;;
    end) break ;;
  esac
done
[ "$2" = gated ] || prepared
setsid node "$private/server.mjs" "$control/gate.sock" "$private/requests" "$private/heartbeat" \
  > "$private/server.log" 2>&1 < /dev/null &
printf '%s\n' "$!" > "$private/server.pid"
for _ in $(seq 100); do
  if [ -f "$private/heartbeat" ]; then prepared; fi
  kill -0 "$(cat "$private/server.pid")" 2>/dev/null || break
  sleep 0.1
done
echo "paddock: the gate server did not start: $(tail -c 500 "$private/server.log")" >&2
exit 3
"""

POLL = r"""private=$PADDOCK_GATE_DIR/runs/$1
if [ ! -f "$private/server.pid" ]; then
  echo "missing"
  exit 0
fi
if kill -0 "$(cat "$private/server.pid")" 2>/dev/null; then
  beat=$(stat -c %Y "$private/heartbeat" 2>/dev/null || echo 0)
  echo "server $(( $(date +%s) - beat ))"
else
  echo "server gone"
fi
dir=$private/requests
[ -d "$dir" ] || exit 0
# The unanswered requests in turn: those after the id the last poll ended at ($2), then from
# the first, so that a request waiting for a person never holds the others back.
export LC_ALL=C  # one order for the glob and the comparison
waiting=()
for request in "$dir"/*.req; do
  [ -f "$request" ] || continue
  id=${request##*/}; id=${id%.req}
  [ -f "$dir/$id.ans" ] || waiting+=("$id")
done
later=(); earlier=()
for id in "${waiting[@]}"; do
  if [[ "$id" > "${2:-}" ]]; then later+=("$id"); else earlier+=("$id"); fi
done
for id in "${later[@]}" "${earlier[@]}"; do
  [ "$((n = ${n:-0} + 1))" -gt MAX_REQUESTS ] && break
  printf 'gate %s ' "$id"; base64 -w0 < "$dir/$id.req"; echo
done
"""

# Answers: ``<id> <base64 answer>`` lines on stdin up to an ``end`` line (exec's stdin is not
# closed); an id is digits and a dash, as the server makes them, and is answered only while
# its request waits.
ANSWER = r"""dir=$PADDOCK_GATE_DIR/runs/$1/requests
while IFS=' ' read -r id value; do
  [ "$id" = end ] && break
  case $id in *[!0-9-]*|'') continue ;; esac
  [ -f "$dir/$id.req" ] || continue
  printf '%s' "$value" | base64 -d > "$dir/$id.tmp" && mv -f "$dir/$id.tmp" "$dir/$id.ans"
done
"""

# The follower of a run its operator follows again (the stream broke, or the operator restarted),
# from the offsets its log is stored up to; "unfollowed" where it cannot be (the run was
# prepared by an older operator, or its pod's sidecar does not mount the runs).
FOLLOW = r"""private=$PADDOCK_GATE_DIR/runs/$1
if [ -z "${PADDOCK_RUN_DIR:-}" ] || [ ! -f "$private/follow.mjs" ]; then echo unfollowed; exit 0; fi
exec node "$private/follow.mjs" "$PADDOCK_RUN_DIR/$1" "$private" "$2" "$3" run
"""

CLOSE = r"""private=$PADDOCK_GATE_DIR/runs/$1
pid=$(cat "$private/server.pid" 2>/dev/null) && kill "$pid" 2>/dev/null
pid=$(cat "$private/follower.pid" 2>/dev/null) && kill "$pid" 2>/dev/null
rm -rf "$private" "$PADDOCK_CONTROL_DIR/runs/$1"
exit 0
"""

MAX_REQUESTS = 16  # a poll's gate requests at most; the next poll goes on after the last
POLL = POLL.replace("MAX_REQUESTS", str(MAX_REQUESTS))
REQUEST_ID = re.compile(r"^[0-9]+-[0-9]+$")
STALE_SECONDS = 15  # a server that has not beaten for this long is taken to be stopped
SERVER = "server.mjs"
FOLLOWER = "follow.mjs"  # the run's follower, in the sidecar's own directory of the run
UNFOLLOWED = "unfollowed"
CLIENT = "gate.mjs"  # the gate client, in the run's control directory
SHELL = "bin/bash"  # Paddock's shell, for a CLI that runs commands through the bash on its PATH
GATE_HOOK = "bin/gate-hook"  # ... and the hook it runs, by this name (data/gate/shell.sh)
PREPARED = "prepared"


def _data(name: str) -> str:
    return (resources.files("paddock") / "data" / "gate" / name).read_text()


def gate_server() -> str:
    return _data("server.mjs")


def gate_client() -> str:
    return _data("client.mjs")


def paddock_shell(harness: str, hook: str) -> dict[str, str]:
    """Paddock's shell (``data/gate/shell.sh``) for ``harness``, and the hook it runs
    (``GATE_HOOK``): ``hook``, the hook's command, run by ``sh`` in the control directory
    (``$PADDOCK_CONTROL``). The CLI's settings name the hook ``gate-hook``."""
    program = f'#!/bin/sh\nPADDOCK_CONTROL="${{0%/{GATE_HOOK}}}"\n{hook}\n'
    return {SHELL: _data("shell.sh").replace("HARNESS", harness), GATE_HOOK: program}


def prepare_argv(run_id: str, *, gated: bool, follow: bool = False) -> list[str]:
    """``follow``: the exec goes on as the run's follower once it has prepared the run."""
    then = "follow" if follow else "exit"
    return ["bash", "-c", PREPARE, "paddock-prepare", run_id, "gated" if gated else "open", then]


def follow_argv(run_id: str, cursor: Mapping[str, int]) -> list[str]:
    offsets = [str(cursor.get("stdout", 0)), str(cursor.get("files", 0))]
    return ["bash", "-c", FOLLOW, "paddock-follow", run_id, *offsets]


def prepare_payload(files: Mapping[str, str], *, gated: bool) -> str:
    """The prepare script's stdin: the run's control files by path (``claude/settings.json``),
    and for a gated run the gate client beside them and the server in the sidecar's own
    directory."""
    lines = [f"file {name} {_b64(text)}" for name, text in files.items()]
    lines.append(f"private {FOLLOWER} {_b64(_data(FOLLOWER))}")
    if gated:
        lines.append(f"file {CLIENT} {_b64(gate_client())}")
        lines.append(f"private {SERVER} {_b64(gate_server())}")
    lines.append("end -")
    return "\n".join(lines) + "\n"


def poll_argv(run_id: str, after: str = "") -> list[str]:
    """``after``: the request the last poll ended at (this one starts after it)."""
    return ["bash", "-c", POLL, "paddock-gate-poll", run_id, after]


def answer_argv(run_id: str) -> list[str]:
    return ["bash", "-c", ANSWER, "paddock-gate-answer", run_id]


def close_argv(run_id: str) -> list[str]:
    return ["bash", "-c", CLOSE, "paddock-gate-close", run_id]


def answer_payload(answers: Mapping[str, str]) -> str:
    """The answer script's stdin; ids that are not the server's own are left out."""
    lines = [f"{i} {_b64(text)}\n" for i, text in answers.items() if REQUEST_ID.match(i)]
    return "".join(lines) + "end -\n"


def _b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


@dataclass
class GatePoll:
    """What one poll of the sidecar saw: no server for the run (``missing``), how long ago
    the server beat, and the requests waiting (id -> the hook's input)."""

    missing: bool = False
    server_age: int | None = None
    requests: dict[str, bytes] = field(default_factory=dict)

    @property
    def server_stopped(self) -> bool:
        return self.missing or self.server_age is None or self.server_age > STALE_SECONDS


def parse_poll(output: str) -> GatePoll:
    poll = GatePoll()
    for line in output.splitlines():
        key, _, value = line.partition(" ")
        if key == "missing":
            poll.missing = True
        elif key == "server" and value.strip().lstrip("-").isdigit():
            poll.server_age = int(value)
        elif key == "gate":
            request_id, _, encoded = value.partition(" ")
            if REQUEST_ID.match(request_id):
                poll.requests[request_id] = base64.b64decode(encoded or "")
    return poll


def cursor(poll: GatePoll) -> str:
    """Where the next poll's requests start: after the last this one brought when it brought
    a full batch (more may wait), else from the first."""
    if len(poll.requests) < MAX_REQUESTS:
        return ""
    return list(poll.requests)[-1]
