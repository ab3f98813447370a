"""The shell scripts that run a harness inside a sandbox through ``pods/exec``, and the payload
and poll formats they speak. Pure: text in, text out.

A run lives in ``$PADDOCK_RUN_DIR/<run uid>/`` on the pod's run volume (an emptyDir, never part
of the workspace or its snapshots):

- ``launch`` (one exec) creates that directory atomically (a second launch of the same run does
  nothing), reads the payload from stdin (the completion nonce, the harness's environment
  including its API keys, the harness script and the prompt), and starts ``wrapper`` in a new
  session, detached from the exec connection. Nothing secret is ever in an argv.
- ``wrapper`` runs the harness in its own session (so cancel can kill its whole process group)
  with stdout and stderr in files, polls the workspace for file changes meanwhile, and when the
  harness exits writes the git changes and, last, the completion record ``<exit code> <nonce>``.
  The nonce reaches the wrapper through a pipe and stays in its memory: it is in no file, argv
  or environment the harness can read (see ``docs/runs.md``).
- ``poll`` (one exec per tick) returns the journals from the given offsets, whether the wrapper
  is alive, and once it has finished, the completion record, the stderr tail and the changes.
- ``signal`` sends a signal to the harness's process group.
- ``gate`` (written into the run directory at launch, when the run has a policy) is what a
  harness's pre-execution hook runs for each shell command: it leaves the hook's request in
  ``requests/<id>.req`` and waits for the operator's answer in ``requests/<id>.ans`` (the poll
  brings requests; ``answer``, one exec, writes answers). It exits 0 only on an answer of ``allow``,
  and 2, the hooks' "block", on anything else: a denial, no answer in time, or an error of its
  own (every CLI runs a command whose hook fails any other way).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

LAUNCH = r"""set -eu
run=$PADDOCK_RUN_DIR/$1
mkdir -p "$PADDOCK_RUN_DIR"
if ! mkdir -m 700 "$run" 2>/dev/null; then
  echo "already-started"
  exit 0
fi
nonce=
while IFS=' ' read -r key name value; do
  case $key in
    nonce) nonce=$name ;;
    # The x keeps a value's trailing newlines, which $(...) would strip.
    env) decoded=$(printf '%s' "$value" | base64 -d; printf x); export "$name=${decoded%x}" ;;
    file) printf '%s' "$value" | base64 -d > "$run/$name" ;;
    end) break ;;
  esac
done
if [ -z "$nonce" ]; then
  echo "paddock: the launch payload carried no nonce" >&2
  exit 2
fi
export PADDOCK_RUN="$run" PADDOCK_PROMPT_FILE="$run/prompt"
printf '%s\n' "$nonce" | setsid bash -c "$2" paddock-wrapper "$run" >/dev/null 2>&1 &
printf '%s\n' "$!" > "$run/wrapper.pid"
echo "started"
"""

WRAPPER = r"""set -u
run=$1
IFS= read -r nonce
exec </dev/null
finish() {
  rm -rf "$run/exit" "$run/exit.tmp"
  printf '%s %s\n' "$1" "$nonce" > "$run/exit.tmp"
  mv -f "$run/exit.tmp" "$run/exit"
  exit 0
}
snapshot() {
  find . \( -name .git -o -name node_modules \) -prune -o -type f -printf '%T@\t%s\t%P\n' \
    2>/dev/null | LC_ALL=C sort -t "$(printf '\t')" -k3
}
compare() {
  LC_ALL=C awk -F '\t' '
    { path = $0; sub(/^[^\t]*\t[^\t]*\t/, "", path); stamp = $1 FS $2 }
    FILENAME == ARGV[1] { old[path] = stamp; next }
    !(path in old) { print "created\t" path; next }
    old[path] != stamp { print "changed\t" path }
    { delete old[path] }
    END { for (path in old) print "deleted\t" path }
  ' "$1" "$2"
}
poll_files() {
  snapshot > "$run/snapshot.new"
  compare "$run/snapshot" "$run/snapshot.new" >> "$run/files"
  mv -f "$run/snapshot.new" "$run/snapshot"
}
: > "$run/stdout"; : > "$run/stderr"; : > "$run/files"
if ! cd "$PADDOCK_WORKSPACE" 2>/dev/null; then
  printf 'paddock: the workspace %s is not there\n' "$PADDOCK_WORKSPACE" >> "$run/stderr"
  finish 127
fi
snapshot > "$run/snapshot"
setsid bash "$run/harness" > "$run/stdout" 2> "$run/stderr" < /dev/null &
child=$!
printf '%s\n' "$child" > "$run/harness.pid"
while kill -0 "$child" 2>/dev/null; do
  sleep "${PADDOCK_FILE_POLL_SECONDS:-0.7}"
  poll_files
done
wait "$child"
code=$?
kill -KILL -- "-$child" 2>/dev/null
poll_files
: > "$run/changes"; : > "$run/diff"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -c core.quotepath=off status --porcelain=v1 --untracked-files=all > "$run/changes" 2>/dev/null
  { git -c core.quotepath=off diff HEAD 2>/dev/null || git -c core.quotepath=off diff; } \
    | head -c 65536 > "$run/diff"
fi
finish "$code"
"""

POLL = r"""run=$PADDOCK_RUN_DIR/$1
if [ ! -d "$run" ]; then
  echo "missing"
  exit 0
fi
chunk() {
  printf '%s ' "$1"
  if [ -f "$run/$1" ]; then tail -c "+$(($2 + 1))" "$run/$1" | head -c "$3" | base64 -w0; fi
  echo
}
pid=$(cat "$run/wrapper.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "alive 1"; else echo "alive 0"; fi
chunk stdout "$2" "$4"
chunk files "$3" "$4"
if [ -d "$run/requests" ]; then
  # The unanswered requests in turn: those after the id the last poll ended at ($5), then
  # from the first, so that a request waiting for a person never holds the others back.
  export LC_ALL=C  # one order for the glob and the comparison
  waiting=()
  for request in "$run"/requests/*.req; do
    [ -f "$request" ] || continue
    id=${request##*/}; id=${id%.req}
    [ -f "$run/requests/$id.ans" ] || waiting+=("$id")
  done
  later=(); earlier=()
  for id in "${waiting[@]}"; do
    if [[ "$id" > "${5:-}" ]]; then later+=("$id"); else earlier+=("$id"); fi
  done
  for id in "${later[@]}" "${earlier[@]}"; do
    [ "$((n = ${n:-0} + 1))" -gt MAX_REQUESTS ] && break
    printf 'gate %s ' "$id"; base64 -w0 < "$run/requests/$id.req"; echo
  done
fi
if [ -f "$run/exit" ]; then
  printf 'exit '; head -c 256 "$run/exit" | base64 -w0; echo
  printf 'stderr '; tail -c STDERR_BYTES "$run/stderr" | base64 -w0; echo
  printf 'changes '; head -c CHANGES_BYTES "$run/changes" 2>/dev/null | base64 -w0; echo
  printf 'diff '; head -c CHANGES_BYTES "$run/diff" 2>/dev/null | base64 -w0; echo
fi
"""

GATE = r"""set -u
trap 'exit 2' EXIT HUP INT TERM
dir=${PADDOCK_RUN:?}/requests
mkdir -p "$dir" 2>/dev/null
id=$(date +%s)-$$
head -c REQUEST_BYTES > "$dir/$id.tmp" && mv -f "$dir/$id.tmp" "$dir/$id.req" || {
  echo "paddock gate: the request could not be written; refused" >&2
  exit 2
}
deadline=$(( $(date +%s) + ${PADDOCK_GATE_SECONDS:-900} ))
while [ ! -f "$dir/$id.ans" ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "paddock gate: no decision in time; refused" >&2
    exit 2
  fi
  sleep 0.1
done
verdict=$(head -n 1 "$dir/$id.ans")
if [ "$verdict" = allow ]; then
  rm -f "$dir/$id.req" "$dir/$id.ans"
  trap - EXIT
  exit 0
fi
tail -n +2 "$dir/$id.ans" >&2
rm -f "$dir/$id.req" "$dir/$id.ans"
exit 2
"""

# Answers: ``<id> <base64 answer>`` lines on stdin up to an ``end`` line (exec's stdin is not
# closed); an id is digits and dashes, as the gate makes them (anything else is not written:
# the ids come from the sandbox).
ANSWER = r"""dir=$PADDOCK_RUN_DIR/$1/requests
while IFS=' ' read -r id value; do
  [ "$id" = end ] && break
  case $id in *[!0-9-]*|'') continue ;; esac
  [ -f "$dir/$id.req" ] || continue
  printf '%s' "$value" | base64 -d > "$dir/$id.tmp" && mv -f "$dir/$id.tmp" "$dir/$id.ans"
done
"""

REQUEST_BYTES = 65536
MAX_REQUESTS = 16  # a poll's gate requests at most; the next poll goes on after the last
GATE = GATE.replace("REQUEST_BYTES", str(REQUEST_BYTES))
STDERR_BYTES = 4096
CHANGES_BYTES = 65536
POLL = (
    POLL.replace("STDERR_BYTES", str(STDERR_BYTES))
    .replace("CHANGES_BYTES", str(CHANGES_BYTES))
    .replace("MAX_REQUESTS", str(MAX_REQUESTS))
)

SIGNAL = r"""pid=$(cat "$PADDOCK_RUN_DIR/$1/harness.pid" 2>/dev/null) || exit 0
kill "-$2" -- "-$pid" 2>/dev/null
exit 0
"""

STARTED = "started"
ALREADY_STARTED = "already-started"


def launch_argv(run_id: str) -> list[str]:
    return ["bash", "-c", LAUNCH, "paddock-launch", run_id, WRAPPER]


def poll_argv(
    run_id: str, stdout_offset: int, files_offset: int, max_bytes: int, gate_after: str = ""
) -> list[str]:
    """``gate_after``: the gate request the last poll ended at (its next one starts after)."""
    return [
        "bash",
        "-c",
        POLL,
        "paddock-poll",
        run_id,
        str(stdout_offset),
        str(files_offset),
        str(max_bytes),
        gate_after,
    ]


def gate_cursor(poll: Poll) -> str:
    """Where the next poll's gate requests start: after the last this one brought when it
    brought a full batch (more may wait), else from the first."""
    if len(poll.gate_requests) < MAX_REQUESTS:
        return ""
    return list(poll.gate_requests)[-1]


# The container's secret env as it started (an exec gets that env): base64, one a line.
STARTED_SECRETS = (
    r"""for n in ${PADDOCK_SECRET_ENV:-}; do printf %s "${!n-}" | base64 -w0; echo; done"""
    "\n"
)


def started_secrets_argv() -> list[str]:
    return ["bash", "-c", STARTED_SECRETS, "paddock-started-secrets"]


def parse_started_secrets(output: str) -> list[str]:
    return [base64.b64decode(line).decode(errors="replace") for line in output.split()]


def signal_argv(run_id: str, signal: str) -> list[str]:
    return ["bash", "-c", SIGNAL, "paddock-signal", run_id, signal]


def answer_argv(run_id: str) -> list[str]:
    return ["bash", "-c", ANSWER, "paddock-answer", run_id]


GATE_ID = re.compile(r"^[0-9]+-[0-9]+$")


def answer_payload(answers: Mapping[str, str]) -> str:
    """The answer script's stdin; ids that are not the gate's own are left out."""
    lines = [f"{i} {_b64(text)}\n" for i, text in answers.items() if GATE_ID.match(i)]
    return "".join(lines) + "end -\n"


def _b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


def launch_payload(
    nonce: str,
    env: Mapping[str, str],
    harness_script: str,
    prompt: str | None,
    files: Mapping[str, str] | None = None,
) -> str:
    """The launch script's stdin: one ``key name value`` line each, values in base64.
    ``files`` are more files for the run directory (the gate, a harness's settings)."""
    lines = [f"nonce {nonce}"]
    lines += [f"env {name} {_b64(value)}" for name, value in env.items()]
    lines += [f"file {name} {_b64(text)}" for name, text in (files or {}).items()]
    lines.append(f"file harness {_b64(harness_script)}")
    lines.append(f"file prompt {_b64(prompt or '')}")
    lines.append("end -")
    return "\n".join(lines) + "\n"


@dataclass
class Completion:
    """The wrapper's record: the harness's exit code and the nonce it was launched with."""

    exit_code: int
    nonce: str


@dataclass
class Poll:
    """What one poll saw."""

    missing: bool = False
    wrapper_alive: bool = False
    stdout: bytes = b""
    files: bytes = b""
    completion: Completion | None = None
    malformed_completion: bool = False
    stderr_tail: str = ""
    changes: str = ""
    diff: str = ""
    gate_requests: dict[str, bytes] = field(default_factory=dict)  # id -> the hook's input
    extra: dict[str, str] = field(default_factory=dict)


def parse_poll(output: str) -> Poll:
    """Read the poll script's output. Unknown lines are kept in ``extra``."""
    poll = Poll()
    for line in output.splitlines():
        key, _, value = line.partition(" ")
        raw = base64.b64decode(value) if key in _BASE64_KEYS else b""
        if key == "missing":
            poll.missing = True
        elif key == "alive":
            poll.wrapper_alive = value.strip() == "1"
        elif key == "stdout":
            poll.stdout = raw
        elif key == "files":
            poll.files = raw
        elif key == "exit":
            poll.completion = parse_completion(raw.decode(errors="replace"))
            poll.malformed_completion = poll.completion is None
        elif key == "stderr":
            poll.stderr_tail = _whole_lines(raw, STDERR_BYTES, keep_end=True)
        elif key == "changes":
            poll.changes = _whole_lines(raw, CHANGES_BYTES, keep_end=False)
        elif key == "diff":
            poll.diff = _whole_lines(raw, CHANGES_BYTES, keep_end=False)
        elif key == "gate":
            request_id, _, encoded = value.partition(" ")
            if GATE_ID.match(request_id):
                poll.gate_requests[request_id] = base64.b64decode(encoded or "")
        else:
            poll.extra[key] = value
    return poll


def _whole_lines(raw: bytes, limit: int, *, keep_end: bool) -> str:
    """A head or tail cut at ``limit`` bytes, without the line the cut went through: a piece
    of a line could hold a piece of a secret too short to be recognised and masked."""
    if len(raw) >= limit:
        if keep_end:
            raw = raw.partition(b"\n")[2]
        else:
            raw = raw.rpartition(b"\n")[0] + b"\n" if b"\n" in raw else b""
    return raw.decode(errors="replace")


_BASE64_KEYS = frozenset({"stdout", "files", "exit", "stderr", "changes", "diff"})


def parse_completion(record: str) -> Completion | None:
    parts = record.split()
    if len(parts) != 2 or not parts[0].lstrip("-").isdigit():
        return None
    return Completion(exit_code=int(parts[0]), nonce=parts[1])


def parse_changes(porcelain: str) -> list[tuple[str, str]]:
    """``git status --porcelain`` lines as (status, path): added, modified, deleted, renamed,
    untracked."""
    changes = []
    for line in porcelain.splitlines():
        if len(line) < 4:
            continue
        code, path = line[:2], line[3:]
        if " -> " in path:
            path = path.split(" -> ", 1)[1]
        changes.append((_STATUS.get(code.strip()[:1] or "M", "modified"), path))
    return changes


_STATUS = {
    "?": "untracked",
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "U": "conflicted",
}
