"""The shell scripts that run a harness inside a sandbox through ``pods/exec``, and the payload
and poll formats they speak. Pure: text in, text out.

A run lives in ``$PADDOCK_RUN_DIR/<run uid>/`` on the pod's run volume (an emptyDir, never part
of the workspace or its snapshots):

- ``launch`` (one exec) reads the payload from stdin (the completion nonce, the harness's
  environment including its API keys, and the prompt; all of it, or nothing starts), creates
  that directory atomically (a second launch of the same run does nothing), and starts
  ``wrapper`` in a new session, detached
  from the exec connection. Nothing secret is ever in an argv. The harness script, like every
  file that decides what the harness may do, is not in this directory but in the run's
  control directory (``$PADDOCK_CONTROL``), which the sandbox's sidecar wrote before the launch
  and the sandbox container mounts read-only (``gate_scripts.py``).
- ``wrapper`` runs the harness in its own session (so cancel can kill its whole process group)
  with stdout and stderr in files, polls the workspace for file changes meanwhile, and when the
  harness exits writes the git changes and, last, the completion record ``<exit code> <nonce>``.
  The nonce reaches the wrapper through a pipe and stays in its memory: it is in no file, argv
  or environment the harness can read (see ``docs/runs.md``).
- ``poll`` (one exec per tick) returns the journals from the given offsets, whether the wrapper
  is alive, and once it has finished, the completion record, the stderr tail and the changes.
- ``signal`` sends a signal to the harness's process group.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field

from paddock.render.init_scripts import SCRUB_FUNCTIONS
from paddock.render.sandbox_shell import END_PROCESSES, OWN_GIT
from paddock.vocab.names import SESSIONS_DIR

LAUNCH = r"""set -eu
run=$PADDOCK_RUN_DIR/$1
control=$PADDOCK_CONTROL_DIR/runs/$1
if [ ! -f "$control/harness" ]; then
  echo "paddock: the run's control files are not there (its sidecar did not prepare it)" >&2
  exit 2
fi
# The whole payload first: an exec cut short (its operator killed mid-launch) leaves no run
# directory, so the run counts as never launched, and is launched again, never half.
nonce= prompt= whole=
while IFS=' ' read -r key name value; do
  case $key in
    nonce) nonce=$name ;;
    # The x keeps a value's trailing newlines, which $(...) would strip.
    env) decoded=$(printf '%s' "$value" | base64 -d; printf x); export "$name=${decoded%x}" ;;
    prompt) prompt=$name ;;
    end) whole=1; break ;;
  esac
done
if [ -z "$whole" ] || [ -z "$nonce" ]; then
  echo "paddock: the launch payload was cut short or carried no nonce: nothing started" >&2
  exit 2
fi
mkdir -p "$PADDOCK_RUN_DIR"
# Readable by the sidecar's user (the pod's fsGroup is one of its groups), which follows the
# run from there; by nobody else.
if ! mkdir -m 750 "$run" 2>/dev/null; then
  echo "already-started"
  exit 0
fi
# A run starts with no process of an earlier one (one whose wrapper was killed, say).
if ! paddock_end_processes; then
  rmdir "$run"
  exit 2
fi
printf '%s' "$prompt" | base64 -d > "$run/prompt"
export PADDOCK_RUN="$run" PADDOCK_CONTROL="$control" PADDOCK_PROMPT_FILE="$run/prompt"
printf '%s\n' "$nonce" | setsid bash -c "$2" paddock-wrapper "$run" >/dev/null 2>&1 &
printf '%s\n' "$!" > "$run/wrapper.pid"
echo "started"
"""

WRAPPER = r"""set -u
run=$1
IFS= read -r nonce
exec </dev/null
umask 022  # the journals are the sidecar's to read too
finish() {
  rm -rf "$run/exit" "$run/exit.tmp"
  printf '%s %s\n' "$1" "$nonce" > "$run/exit.tmp"
  mv -f "$run/exit.tmp" "$run/exit"
  exit 0
}
snapshot() {
  find . \( -name .git -o -name node_modules -o -path ./@SESSIONS@ \) -prune \
    -o -type f -printf '%T@\t%s\t%P\n' 2>/dev/null | LC_ALL=C sort -t "$(printf '\t')" -k3
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
paddock_started=$(command -p date +%s.%N)
setsid bash "$PADDOCK_CONTROL/harness" > "$run/stdout" 2> "$run/stderr" < /dev/null &
child=$!
printf '%s\n' "$child" > "$run/harness.pid"
while kill -0 "$child" 2>/dev/null; do
  sleep "${PADDOCK_FILE_POLL_SECONDS:-0.7}"
  poll_files
done
wait "$child"
code=$?
kill -KILL -- "-$child" 2>/dev/null
ended=0
paddock_end_processes 2>> "$run/stderr" || ended=1
paddock_mask_sessions 2>> "$run/stderr"
poll_files
# The work tree against HEAD, read by Paddock's own git (sandbox_shell.py), once nothing of
# the run's runs.
: > "$run/changes"; : > "$run/diff"
if [ "$ended" = 0 ] && paddock_git_dir "$PWD" "$run/git"; then
  paddock_git read-tree HEAD 2>/dev/null
  paddock_git status --porcelain=v1 --untracked-files=all --ignore-submodules=all \
    > "$run/changes" 2>/dev/null
  paddock_git diff HEAD --ignore-submodules=all 2>/dev/null | head -c 65536 > "$run/diff"
  rm -rf "$run/git"
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
if [ -f "$run/exit" ]; then
  printf 'exit '; head -c 256 "$run/exit" | base64 -w0; echo
  printf 'stderr '; tail -c STDERR_BYTES "$run/stderr" | base64 -w0; echo
  printf 'changes '; head -c CHANGES_BYTES "$run/changes" 2>/dev/null | base64 -w0; echo
  printf 'diff '; head -c CHANGES_BYTES "$run/diff" 2>/dev/null | base64 -w0; echo
fi
"""

# The conversations the run's CLI wrote on the volume (``vocab.names.SESSIONS_DIR``), which
# its snapshots and archives hold: every form of the container's and the run's secret values
# (init_scripts.SCRUB_FUNCTIONS) overwritten with as many '*' (a file keeps its size), in each
# file changed since the run started (by its ctime, which no one can set back). What cannot be
# masked goes: a file of more than one link or over MASK_BYTES, one sed fails on or takes
# longer than MASK_SECONDS on, a store reached through a link. A form of more than one line
# is masked line by line. Commands from the system's own directories only.
MASK_SESSIONS = r"""
paddock_mask_sessions() (
  local -x PATH=/usr/bin:/bin LC_ALL=C
  cd "$PADDOCK_WORKSPACE" 2>/dev/null || exit 0
  local store=@SESSIONS@ form stars file
  if [ -L .paddock ] || [ -L "$store" ]; then rm -f .paddock "$store"; exit 0; fi
  [ -d "$store" ] || exit 0
  PADDOCK_SECRET_ENV="${PADDOCK_SECRET_ENV:-} ${PADDOCK_RUN_SECRET_ENV:-}"
  [ -n "${PADDOCK_SECRET_ENV// /}" ] || exit 0
  SCRUB_FUNCTIONS
  : > "$run/mask.sed"
  for form in "${_paddock_forms[@]}"; do
    [[ $form == *$'\n'* ]] && continue
    printf -v stars '%*s' "${#form}" ''
    printf 's/%s/%s/g\n' "$(_paddock_sed_escape "$form")" "${stars// /*}" >> "$run/mask.sed"
  done
  [ -s "$run/mask.sed" ] || exit 0
  find "$store" -newerct "@$paddock_started" ! -type d -print0 |
  while IFS= read -r -d '' file; do
    if [ -L "$file" ] || [ ! -f "$file" ] || [ "$(stat -c %h -- "$file")" != 1 ] ||
       [ "$(stat -c %s -- "$file")" -gt MASK_BYTES ]; then
      echo "paddock: $file cannot be masked (not a file of one link, or too large): removed" >&2
      rm -f -- "$file"
    elif timeout MASK_SECONDS sed -f "$run/mask.sed" < "$file" > "$run/masked"; then
      cmp -s -- "$file" "$run/masked" || cat -- "$run/masked" > "$file"
    else
      echo "paddock: $file could not be masked: it is emptied" >&2
      : > "$file"
    fi
  done
  rm -f "$run/mask.sed" "$run/masked"
)
""".replace("SCRUB_FUNCTIONS", SCRUB_FUNCTIONS)
MASK_BYTES = 64 << 20
MASK_SECONDS = 120
MASK_SESSIONS = MASK_SESSIONS.replace("MASK_BYTES", str(MASK_BYTES))
MASK_SESSIONS = MASK_SESSIONS.replace("MASK_SECONDS", str(MASK_SECONDS))

LAUNCH = END_PROCESSES + LAUNCH
WRAPPER = (OWN_GIT + END_PROCESSES + MASK_SESSIONS + WRAPPER).replace("@SESSIONS@", SESSIONS_DIR)
STDERR_BYTES = 4096
CHANGES_BYTES = 65536
POLL = POLL.replace("STDERR_BYTES", str(STDERR_BYTES)).replace("CHANGES_BYTES", str(CHANGES_BYTES))

SIGNAL = r"""pid=$(cat "$PADDOCK_RUN_DIR/$1/harness.pid" 2>/dev/null) || exit 0
kill "-$2" -- "-$pid" 2>/dev/null
exit 0
"""

STARTED = "started"
ALREADY_STARTED = "already-started"


def launch_argv(run_id: str) -> list[str]:
    return ["bash", "-c", LAUNCH, "paddock-launch", run_id, WRAPPER]


def poll_argv(run_id: str, stdout_offset: int, files_offset: int, max_bytes: int) -> list[str]:
    return [
        "bash",
        "-c",
        POLL,
        "paddock-poll",
        run_id,
        str(stdout_offset),
        str(files_offset),
        str(max_bytes),
    ]


# The container's secret env as it started (an exec gets that env): base64, one a line.
STARTED_SECRETS = (
    r"""for n in ${PADDOCK_SECRET_ENV:-}; do"""
    r""" if [[ $n =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then printf %s "${!n-}";"""
    r""" else v=$(printenv -- "$n"; printf x); v=${v%x}; printf %s "${v%$'\n'}"; fi"""
    r""" | base64 -w0; echo; done"""
    "\n"
)


def started_secrets_argv() -> list[str]:
    return ["bash", "-c", STARTED_SECRETS, "paddock-started-secrets"]


def parse_started_secrets(output: str) -> list[str]:
    return [base64.b64decode(line).decode(errors="replace") for line in output.split()]


def signal_argv(run_id: str, signal: str) -> list[str]:
    return ["bash", "-c", SIGNAL, "paddock-signal", run_id, signal]


def _b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


# The names of the run's variables that hold secret values (its ``secrets``, a model key, its
# routes' URLs), for the wrapper to mask (``MASK_SESSIONS``).
RUN_SECRET_ENV = "PADDOCK_RUN_SECRET_ENV"  # noqa: S105  (a variable name, not a secret)


def launch_payload(
    nonce: str, env: Mapping[str, str], prompt: str | None, secret: Mapping[str, str] | None = None
) -> str:
    """The launch script's stdin: one ``key name value`` line each, values in base64: the
    run's ``env`` and then its ``secret`` variables."""
    env = {**env, **(secret or {}), RUN_SECRET_ENV: " ".join(secret or {})}
    lines = [f"nonce {nonce}"]
    lines += [f"env {name} {_b64(value)}" for name, value in env.items()]
    lines.append(f"prompt {_b64(prompt or '')}")
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
        elif key in ("exit", "stderr", "changes", "diff"):
            _read_into(poll, key, raw)
        else:
            poll.extra[key] = value
    return poll


def read_finish(poll: Poll, finish: Mapping[str, str]) -> None:
    """The wrapper's record and what it left when the harness ended (``exit``, ``stderr``,
    ``changes``, ``diff``, each in base64, as the follower sends them) into ``poll``."""
    for key in ("exit", "stderr", "changes", "diff"):
        _read_into(poll, key, base64.b64decode(finish.get(key) or ""))


def _read_into(poll: Poll, key: str, raw: bytes) -> None:
    if key == "exit":
        poll.completion = parse_completion(raw.decode(errors="replace"))
        poll.malformed_completion = poll.completion is None
    elif key == "stderr":
        poll.stderr_tail = _whole_lines(raw, STDERR_BYTES, keep_end=True)
    elif key == "changes":
        poll.changes = _whole_lines(raw, CHANGES_BYTES, keep_end=False)
    elif key == "diff":
        poll.diff = _whole_lines(raw, CHANGES_BYTES, keep_end=False)


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
