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
  own). A repository git cannot read so (another object format, reftable refs) is not read.
- ``paddock_end_processes`` ends every process left in the sandbox container but its first
  (the keep-alive), this script's own, and those of an exec session (Paddock's polls, a
  person's ``kubectl exec``): an exec session's first process has its parent outside the
  container's process namespace (parent pid 0), and a process the agent starts, however it
  detaches (double forks, ``setsid``, ``nohup``, ``disown``), is reparented within it, never
  into an exec session. Each is stopped first, until a pass finds none that is not, then
  killed: a process that forks as fast as it can cannot outrun it. Only where the container
  has a process namespace of its own (its first process is the keep-alive): kwok's pods run
  on the host's.
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
  rm -rf "$PADDOCK_GIT_DIR" && mkdir -p "$PADDOCK_GIT_DIR/refs" "$PADDOCK_GIT_DIR/info" || return 1
  cp -P "$repo/HEAD" "$PADDOCK_GIT_DIR/HEAD" || return 1
  if [ -d "$repo/refs" ]; then cp -RP "$repo/refs/." "$PADDOCK_GIT_DIR/refs/" || return 1; fi
  for name in packed-refs shallow info/exclude; do
    if [ -f "$repo/$name" ]; then cp -P "$repo/$name" "$PADDOCK_GIT_DIR/$name" || return 1; fi
  done
  # Data only: no link, pipe or device of the agent's is opened by git.
  find "$PADDOCK_GIT_DIR" -mindepth 1 ! -type f ! -type d -exec rm -f {} +
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
paddock_leftovers() {
  local -A parent mine
  local line pid p me=$BASHPID
  for p in /proc/[0-9]*/stat; do
    { IFS= read -r line < "$p"; } 2>/dev/null || continue
    pid=${line%% *}; line=${line##*) }
    set -- $line
    [ "$1" = Z ] || parent[$pid]=$2
  done
  p=$me
  while [ -n "$p" ] && [ "$p" != 0 ]; do mine[$p]=1; p=${parent[$p]:-}; done
  for pid in "${!parent[@]}"; do
    [ "$pid" != 1 ] && [ -z "${mine[$pid]:-}" ] || continue
    p=$pid
    while [ "$p" != 1 ]; do
      [ "$p" != "$me" ] || continue 2
      p=${parent[$p]:-0}
      [ "$p" != 0 ] || continue 2
    done
    printf '%s\n' "$pid"
  done | sort -n | tr '\n' ' '
}
paddock_end_processes() {
  [ "$(tr '\0' '\n' < /proc/1/cmdline 2>/dev/null)" = KEEP_ALIVE ] || return 0
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
