#!/bin/sh
# Paddock's bash, first on the PATH of a CLI that runs its commands and hooks through the
# `bash` it finds there (Gemini CLI), at $PADDOCK_CONTROL/bin/bash (read-only to the agent).
#
# Started by the CLI itself (its parent is the process the harness registered with the gate
# server, in cli.pid beside this directory), it runs only Paddock's hook (bin/gate-hook, which
# the run's settings name bare: the CLI expands variables in a hook's command) or a command the
# gate allowed (once, as the hook asked about it): so a command whose hook was killed before it
# answered is refused, not run; and the command runs without the variables the CLI gained from
# no one but the agent (the gate client names them: Gemini CLI loads a workspace's
# .gemini/.env), which would make bash, git or a runtime run code of the agent's. Started by
# anything else (a command the gate allowed runs `bash`), it is bash. HARNESS: the CLI, whose
# wrapping of a command the gate client knows. (dash reads nothing of its environment that runs
# code, when not interactive.)
IFS=' 	
'
control=${0%/bin/bash}
cli=$(cat "$control/cli.pid" 2>/dev/null)
if [ -n "$cli" ] && [ "$PPID" != "$cli" ]; then
  exec /bin/bash "$@"
fi
if [ "$#" = 2 ] && [ "$1" = -c ] && [ "$2" = gate-hook ]; then
  exec "$control/bin/gate-hook"
fi
drop=$(env -i PATH="$PATH" node "$control/gate.mjs" shell HARNESS "$@") || exit 126
set -f
IFS='
'
exec env $(for name in $drop; do printf -- '-u\n%s\n' "$name"; done) /bin/bash "$@"
