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
  own): the wrapper's status and diff ignore them, a delivery takes each as its index entry.
  A repository git cannot read so (another object format, reftable refs) is not read, nor
  one whose objects hold a link, pipe or device.
- ``paddock_end_processes`` ends every process left in the sandbox container but its first
  (the keep-alive) and the ``sleep`` it waits on, this script's own, and those of an exec
  session (Paddock's polls, a person's ``kubectl exec``): an exec session's first process has
  its parent outside the container's process namespace (parent pid 0), and a process the agent
  starts, however it detaches (double forks, ``setsid``, ``nohup``, ``disown``), is reparented
  within it, never into an exec session. A zombie whose other threads run is alive; a process
  whose parent is not seen is a leftover. Each is stopped first, until a pass finds none that
  is not, then killed: a process that forks as fast as it can cannot outrun it. The
  keep-alive's ``sleep`` is told by what only it can be: a child of the first process running
  the system's ``sleep 3600`` in the container's own environment (a process that is all of
  that does nothing else). A container whose first process is not the keep-alive is refused
  (fail closed). Run as root, it ends nothing: a sandbox never runs as root, and kwok's pods,
  which do, run in the host's process namespace.
"""

from __future__ import annotations

import shlex

from paddock.render.containers import KEEP_ALIVE

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
}
paddock_git_gitlinks_as_they_are() {
  # git would go into each submodule's repository (and its configuration) to see whether
  # it changed: a submodule is taken as the index has it.
  paddock_git ls-files -s -z | while IFS= read -r -d '' entry; do
    case $entry in 160000\ *) printf '%s\0' "${entry#*$'\t'}" ;; esac
  done | paddock_git update-index -z --assume-unchanged --stdin
}
paddock_git() {
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/nonexistent LC_ALL=C \
    GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
    GIT_NO_REPLACE_OBJECTS=1 GIT_TERMINAL_PROMPT=0 \
    GIT_DIR="$PADDOCK_GIT_DIR" GIT_WORK_TREE="$PWD" GIT_OBJECT_DIRECTORY="$PWD/.git/objects" \
    GIT_AUTHOR_NAME=Paddock GIT_AUTHOR_EMAIL=paddock@noreply.paddock.dev \
    GIT_COMMITTER_NAME=Paddock GIT_COMMITTER_EMAIL=paddock@noreply.paddock.dev \
    timeout GIT_SECONDS git -c core.quotepath=off "$@"
}
""".replace("GIT_SECONDS", str(GIT_SECONDS))

END_PROCESSES = r"""
paddock_keep_alives_sleep() {
  [ "${parent[$1]:-}" = 1 ] || return 1
  [ "$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null)" = "sleep 3600 " ] || return 1
  case $(readlink "/proc/$1/exe" 2>/dev/null) in
    /bin/sleep|/usr/bin/sleep|/bin/busybox|/usr/bin/busybox) ;;
    *) return 1 ;;
  esac
  cmp -s "/proc/$1/environ" /proc/1/environ
}
paddock_leftovers() {
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
  done
  p=$me
  while [ -n "$p" ] && [ "$p" != 0 ]; do mine[$p]=1; p=${parent[$p]:-}; done
  for pid in "${!parent[@]}"; do
    [ "$pid" != 1 ] && [ -z "${mine[$pid]:-}" ] && [ -z "${dead[$pid]:-}" ] || continue
    ! paddock_keep_alives_sleep "$pid" || continue
    p=$pid
    while [ "$p" != 1 ] && [ -n "${parent[$p]:-}" ]; do
      [ "$p" != "$me" ] && [ "${parent[$p]}" != 0 ] || continue 2
      p=${parent[$p]}
    done
    printf '%s\n' "$pid"
  done | sort -n | tr '\n' ' '
}
paddock_end_processes() {
  if [ "$(id -u)" = 0 ]; then return 0; fi
  if [ "$(tr '\0' '\n' < /proc/1/cmdline 2>/dev/null)" != KEEP_ALIVE ]; then
    echo "paddock: this container's first process is not the sandbox's keep-alive" >&2
    return 1
  fi
  local found previous= pass
  for pass in $(seq 200); do
    found=$(paddock_leftovers)
    [ -n "$found" ] || return 0
    if [ "$found" = "$previous" ]; then
      kill -KILL $found 2>/dev/null
    else
      kill -STOP $found 2>/dev/null
    fi
    previous=$found
  done
  echo "paddock: processes the run left would not end: $found" >&2
  return 1
}
""".replace("KEEP_ALIVE", shlex.quote("\n".join(KEEP_ALIVE)))
