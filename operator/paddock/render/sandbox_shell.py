"""Shell functions of the scripts Paddock runs in the sandbox container, as the agent's user
(the launch and the wrapper of a run, a delivery's commit and bundle). Pure text.

Nothing the agent wrote configures them (docs/security.md, "The agent's files are data"):

- ``paddock_git`` reads the workspace's repository as data. Its objects are read where they
  are; its ``HEAD``, refs, packed refs, shallow list and excludes are copied into a git directory of
  Paddock's own (``paddock_git_dir``); nothing else of it is read. So git reads no
  configuration of the repository's, the user's or the system's (any of which can name a
  program for git to run: fsmonitor, hooks, filters and diff drivers, textconv, a pager or
  editor, credential helpers, ssh) and no hook, and takes no index the agent left, in an
  environment of Paddock's own (no ``BASH_ENV``, ``PATH``, ``GIT_*`` or ``HOME`` of the
  agent's). A driver that the workspace's ``.gitattributes`` names is no program: with no
  configuration, it names none. Submodules are not gone into (each has configuration of its
  own): the wrapper's status and diff ignore them, a delivery takes each as its index entry
  and leaves out a repository in the work tree that is not one.
  A repository git cannot read so (another object format, reftable refs) is not read, nor
  one whose objects hold a link, pipe or device.
- ``paddock_end_processes`` ends every process left in the sandbox container but its first
  (the keep-alive), this script's own, and those of an exec session (Paddock's polls, a
  person's ``kubectl exec``): an exec session's first process has its parent outside the
  container's process namespace (parent pid 0), and a process the agent starts, however it
  detaches (double forks, ``setsid``, ``nohup``, ``disown``), is reparented within it, never
  into an exec session. A zombie whose other threads run is alive; a process whose parent is
  not seen is a leftover. Each is stopped, pass after pass, until a pass finds the same ones
  and every one of them stopped (none can start another); then all are killed. A child of the
  keep-alive that starts after that moment is the keep-alive's own (its ``sleep``): nothing
  else is left to start one. So a process forking as fast as it can does not outrun it, and
  the keep-alive's ``sleep`` is not killed over and over. A container whose first process is
  not the keep-alive is refused (fail closed). Run as root, it ends nothing: a sandbox never
  runs as root, and kwok's pods, which do, run in the host's process namespace. Its commands
  come from the system's own directories, never an image's ``PATH``.
"""

from __future__ import annotations

import shlex

from paddock.render.containers import KEEP_ALIVE
from paddock.vocab.names import SESSIONS_DIR

# git is bounded: a named pipe where a ref or an object should be would hold it forever.
GIT_SECONDS = 300

OWN_GIT = r"""
paddock_git_dir() {
  local repo=$1/.git name
  PADDOCK_GIT_DIR=$2
  [ -d "$repo" ] && [ ! -L "$repo" ] && [ -d "$repo/objects" ] && [ -f "$repo/HEAD" ] || return 1
  # Data only: no link, pipe or device where git reads objects (a pipe would hold it).
  if [ -n "$(timeout GIT_SECONDS find "$repo/objects" ! -type f ! -type d -print -quit)" ]; then
    echo "paddock: the repository's objects hold a link, pipe or device" >&2
    return 1
  fi
  rm -rf "$PADDOCK_GIT_DIR" && mkdir -p "$PADDOCK_GIT_DIR/refs" "$PADDOCK_GIT_DIR/info" || return 1
  cp -P "$repo/HEAD" "$PADDOCK_GIT_DIR/HEAD" || return 1
  if [ -d "$repo/refs" ]; then
    timeout GIT_SECONDS cp -RP "$repo/refs/." "$PADDOCK_GIT_DIR/refs/" || return 1
  fi
  for name in packed-refs shallow info/exclude; do
    if [ -f "$repo/$name" ]; then cp -P "$repo/$name" "$PADDOCK_GIT_DIR/$name" || return 1; fi
  done
  # Data only: no link, pipe or device of the agent's is opened by git.
  find "$PADDOCK_GIT_DIR" -mindepth 1 ! -type f ! -type d -exec rm -f {} +
  # The CLIs' conversations are no part of the work.
  printf '\n/%s/\n' "@SESSIONS@" >> "$PADDOCK_GIT_DIR/info/exclude"
}
paddock_git_no_nested_repositories() {
  # A repository inside the work tree that HEAD does not hold as a submodule is left out: git
  # would open it (its HEAD, its refs) to add it.
  local found dir
  timeout GIT_SECONDS find . -path ./.git -prune -o -name .git -prune -print0 \
    2>/dev/null | while IFS= read -r -d '' found; do
    dir=${found%/.git}; dir=${dir#./}
    case $dir in *$'\n'*) continue ;; esac
    printf '/%s/\n' "$(printf '%s' "$dir" | sed 's/[][*?\\#! ]/\\&/g')"
  done >> "$PADDOCK_GIT_DIR/info/exclude"
}
paddock_git_gitlinks_as_they_are() {
  # git would go into each submodule's repository (and its configuration) to see whether
  # it changed: a submodule is taken as the index has it.
  paddock_git ls-files -s -z | while IFS= read -r -d '' entry; do
    case $entry in 160000\ *) printf '%s\0' "${entry#*$'\t'}" ;; esac
  done | paddock_git update-index -z --assume-unchanged --stdin
}
paddock_git() {
  command -p env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/nonexistent LC_ALL=C \
    GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
    GIT_NO_REPLACE_OBJECTS=1 GIT_TERMINAL_PROMPT=0 \
    GIT_DIR="$PADDOCK_GIT_DIR" GIT_WORK_TREE="$PWD" GIT_OBJECT_DIRECTORY="$PWD/.git/objects" \
    GIT_AUTHOR_NAME=Paddock GIT_AUTHOR_EMAIL=paddock@noreply.paddock.dev \
    GIT_COMMITTER_NAME=Paddock GIT_COMMITTER_EMAIL=paddock@noreply.paddock.dev \
    timeout GIT_SECONDS git -c core.quotepath=off "$@"
}
""".replace("GIT_SECONDS", str(GIT_SECONDS)).replace("@SESSIONS@", SESSIONS_DIR)

END_PROCESSES = r"""
paddock_leftovers() {
  local -x PATH=/usr/bin:/bin
  local -A parent dead mine
  local line pid p me=$BASHPID tasks
  for p in /proc/[0-9]*/stat; do
    { IFS= read -r line < "$p"; } 2>/dev/null || continue
    pid=${line%% *}; line=${line##*) }
    set -- $line
    parent[$pid]=$2
    if [ "$1" = Z ]; then
      tasks=("/proc/$pid/task/"*)
      [ "${#tasks[@]}" -gt 1 ] || dead[$pid]=1
    fi
    # Once every leftover was stopped and killed, only the keep-alive starts a child of its own.
    if [ "$2" = 1 ] && [ -n "${PADDOCK_SPARED_FROM:-}" ] && [ "${20}" -gt "$PADDOCK_SPARED_FROM" ]
    then dead[$pid]=1; fi
  done
  p=$me
  while [ -n "$p" ] && [ "$p" != 0 ]; do mine[$p]=1; p=${parent[$p]:-}; done
  for pid in "${!parent[@]}"; do
    [ "$pid" != 1 ] && [ -z "${mine[$pid]:-}" ] && [ -z "${dead[$pid]:-}" ] || continue
    p=$pid
    while [ "$p" != 1 ] && [ -n "${parent[$p]:-}" ]; do
      [ "$p" != "$me" ] && [ "${parent[$p]}" != 0 ] || continue 2
      p=${parent[$p]}
    done
    printf '%s\n' "$pid"
  done | sort -n | tr '\n' ' '
}
paddock_all_stopped() {
  local pid line
  for pid in "$@"; do
    { IFS= read -r line < "/proc/$pid/stat"; } 2>/dev/null || continue
    line=${line##*) }
    case ${line%% *} in T|t|Z|X) ;; *) return 1 ;; esac
  done
}
paddock_ticks() {
  local up rest
  read -r up rest < /proc/uptime
  echo $(( ${up%.*} * 100 + 10#${up#*.} ))
}
paddock_end_processes() {
  local -x PATH=/usr/bin:/bin
  if [ "$EUID" = 0 ]; then return 0; fi
  if [ "$(tr '\0' '\n' < /proc/1/cmdline 2>/dev/null)" != KEEP_ALIVE ]; then
    echo "paddock: this container's first process is not the sandbox's keep-alive" >&2
    return 1
  fi
  local found previous= pass PADDOCK_SPARED_FROM=
  for pass in $(seq 200); do
    found=$(paddock_leftovers)
    [ -n "$found" ] || return 0
    if [ "$found" = "$previous" ] && paddock_all_stopped $found; then
      # None of them can start another now: kill them; a child the keep-alive starts from
      # this moment on (its sleep) is its own.
      PADDOCK_SPARED_FROM=$(paddock_ticks)
      kill -KILL $found 2>/dev/null || :
    else
      kill -STOP $found 2>/dev/null || :
    fi
    previous=$found
  done
  echo "paddock: processes the run left would not end: $found" >&2
  return 1
}
""".replace("KEEP_ALIVE", shlex.quote("\n".join(KEEP_ALIVE)))
