"""The scripts of the ``clone`` and ``project`` init containers.

They read what varies from their environment (``GIT_URL``, ``GIT_REF``, ...) rather than
having it spliced into the text, so a URL or ref is never parsed by the shell. A token reaches
git only through ``askpass.sh``, which prints the value of the env var that
``PADDOCK_ASKPASS_TOKEN_VAR`` names: never in a URL, an argument or a log line.
"""

from __future__ import annotations

import shlex

from paddock.render.projections import INSTRUCTION_LINKS, Projection
from paddock.runs.scrubbing import MIN_PART, MIN_WHOLE, SECRET_MASK

SECRET_ENV_VAR = "PADDOCK_SECRET_ENV"  # noqa: S105  (a variable name, not a secret)

# Bash functions for a script whose output anyone who may read the pod sees (its termination
# message, a setup step's container log): the values of the container's secret env, as they
# were when the script started, are masked in the forms the run log masks them in (``runs.
# scrubbing.variants``: whole, trimmed, line by line, URL-encoded, base64 at any alignment),
# longest first. The forms are worked out once, at the start (``base64`` forks, nothing else);
# ``_paddock_mask_lines`` then masks a stream line by line without a fork. The operator masks
# what it copies again.
SCRUB_FUNCTIONS = (
    r"""
_paddock_secrets=()
_paddock_env() { # name -> the value the environment holds (any name: a.b, a-b too), in REPLY
  if [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then REPLY=${!1-}; return; fi
  REPLY=$(printenv -- "$1"; printf x); REPLY=${REPLY%x}; REPLY=${REPLY%$'\n'}
}
for _paddock_name in ${PADDOCK_SECRET_ENV:-}; do
  _paddock_env "$_paddock_name"
  _paddock_secrets+=("$REPLY")
done
_paddock_trim() { # text -> text without surrounding blanks (and a CR)
  local s=${1%$'\r'}
  s=${s#"${s%%[![:space:]]*}"}
  printf '%s' "${s%"${s##*[![:space:]]}"}"
}
_paddock_quote() { # text [plus] -> URL-encoded (every byte but A-Za-z0-9_.-~; plus: " " is +)
  local LC_ALL=C s=$1 out="" c i
  for (( i = 0; i < ${#s}; i++ )); do
    c=${s:i:1}
    case $c in
      [A-Za-z0-9_.~-]) out+=$c ;;
      " ") if [ -n "${2:-}" ]; then out+=+; else out+=%20; fi ;;
      *) printf -v c '%%%02X' "'$c"; out+=$c ;;
    esac
  done
  printf '%s' "$out"
}
_paddock_json() { # text -> the text as a JSON string holds it (no quotes), in REPLY
  local s=$1 hex c i
  s=${s//'\'/'\\'}; s=${s//'"'/'\"'}; s=${s//$'\n'/'\n'}; s=${s//$'\r'/'\r'}
  s=${s//$'\t'/'\t'}; s=${s//$'\b'/'\b'}; s=${s//$'\f'/'\f'}
  for (( i = 1; i < 32; i++ )); do
    printf -v hex '%02x' "$i"; printf -v c "\\x$hex"
    [[ $s == *"$c"* ]] && s=${s//"$c"/"\\u00$hex"}
  done
  REPLY=$s
}
_paddock_forms=()
_paddock_form() { # a form of a secret, masked when long enough
  [ "${#1}" -ge "$2" ] || return 0
  local form
  for form in "${_paddock_forms[@]}"; do [ "$form" = "$1" ] && return 0; done
  _paddock_forms+=("$1")
}
_paddock_encoded() { # form -> its URL encodings and base64 cores, at every alignment
  local LC_ALL=C offset start end text
  _paddock_form "$(_paddock_quote "$1")" MIN_PART
  _paddock_form "$(_paddock_quote "$1" plus)" MIN_PART
  command -v base64 > /dev/null || return 0
  for offset in 0 1 2; do
    start=$(( (8 * offset + 5) / 6 ))
    end=$(( (8 * (offset + $(printf '%s' "$1" | wc -c)) ) / 6 ))
    text=$({ head -c "$offset" /dev/zero; printf '%s' "$1"; } | base64 -w0)
    _paddock_form "${text:start:end-start}" MIN_PART
    text=${text//+/-}; text=${text//\//_}
    _paddock_form "${text:start:end-start}" MIN_PART
  done
}
for _paddock_value in "${_paddock_secrets[@]}"; do
  _paddock_base=("$_paddock_value" "$(_paddock_trim "$_paddock_value")")
  for _paddock_line in "${_paddock_base[@]}"; do _paddock_form "$_paddock_line" MIN_WHOLE; done
  _paddock_line=${_paddock_value%$'\n'}
  if [[ ${_paddock_line%$'\r'} == *[$'\n\r']* ]]; then  # more than one line: each one too
    while IFS= read -r _paddock_line || [ -n "$_paddock_line" ]; do
      _paddock_line=$(_paddock_trim "$_paddock_line")
      [ "${#_paddock_line}" -ge MIN_PART ] && _paddock_base+=("$_paddock_line")
    done <<< "$_paddock_value"
  fi
  for _paddock_line in "${_paddock_base[@]:2}"; do _paddock_form "$_paddock_line" MIN_PART; done
  for _paddock_line in "${_paddock_base[@]}"; do
    [ -n "$_paddock_line" ] && _paddock_encoded "$_paddock_line"
  done
  for _paddock_i in "${!_paddock_base[@]}"; do  # as a JSON string holds it
    _paddock_json "${_paddock_base[_paddock_i]}"
    _paddock_form "$REPLY" "$(( _paddock_i < 2 ? MIN_WHOLE : MIN_PART ))"
  done
done
# Longest first, so that a value masks whole before a part of it could.
for (( _paddock_i = 1; _paddock_i < ${#_paddock_forms[@]}; _paddock_i++ )); do
  _paddock_line=${_paddock_forms[_paddock_i]}
  for (( _paddock_j = _paddock_i; _paddock_j > 0; _paddock_j-- )); do
    [ "${#_paddock_forms[_paddock_j-1]}" -lt "${#_paddock_line}" ] || break
    _paddock_forms[_paddock_j]=${_paddock_forms[_paddock_j-1]}
  done
  _paddock_forms[_paddock_j]=$_paddock_line
done
_paddock_scrub() { # stdin -> stdout, secret values masked
  local text form
  text=$(cat; printf x); text=${text%x}
  for form in "${_paddock_forms[@]}"; do text=${text//"$form"/MASK}; done
  printf '%s' "$text"
}
_paddock_sed_escape() { # text -> the text as a sed basic regular expression matches it
  local s=$1
  s=${s//\\/\\\\}; s=${s//\//\\/}; s=${s//./\\.}; s=${s//\*/\\*}
  s=${s//\[/\\[}; s=${s//\]/\\]}; s=${s//^/\\^}; s=${s//\$/\\$}
  printf '%s' "$s"
}
_paddock_mask_stream() { # script-file [end-line]; stdin -> stdout as _paddock_mask_lines,
  local form  # by GNU sed where there is one (a block at a time), else by bash (a byte at a
  : > "$1"    # time); up to the end line (not shown), if given
  [ -n "${2:-}" ] && printf '/^%s$/Q\n' "$(_paddock_sed_escape "$2")" >> "$1"
  for form in "${_paddock_forms[@]}"; do
    [[ $form == *$'\n'* ]] || printf 's/%s/MASK/g\n' "$(_paddock_sed_escape "$form")" >> "$1"
  done
  if LC_ALL=C sed -u -f "$1" < /dev/null > /dev/null 2>&1; then
    LC_ALL=C exec sed -u -f "$1"
  fi
  _paddock_mask_lines "${2:-}"
}
_paddock_mask_lines() { # [end-line]; stdin -> stdout, line by line as it comes, masked
  local line form end
  while IFS= read -r line; end=$?; [ "$end" -eq 0 ] || [ -n "$line" ]; do
    [ -n "${1:-}" ] && [ "$line" = "$1" ] && return 0
    for form in "${_paddock_forms[@]}"; do line=${line//"$form"/MASK}; done
    if [ "$end" -eq 0 ]; then printf '%s\n' "$line"; else printf '%s' "$line"; fi
  done
}
""".replace("MIN_WHOLE", str(MIN_WHOLE))
    .replace("MIN_PART", str(MIN_PART))
    .replace("MASK", SECRET_MASK)
)

ASKPASS_SCRIPT = r"""#!/usr/bin/env bash
# git asks for a username, then a password: the token comes from the environment only.
case "${1:-}" in
  Username*) printf '%s\n' "${PADDOCK_GIT_USERNAME:-x-access-token}" ;;
  *) printf '%s\n' "${!PADDOCK_ASKPASS_TOKEN_VAR:-}" ;;
esac
"""

CLONE_SCRIPT = (
    r"""#!/usr/bin/env bash
# Clone $GIT_URL at $GIT_REF (depth $GIT_DEPTH) into /workspace.
set -uo pipefail
"""
    + SCRUB_FUNCTIONS
    + r"""
term="${PADDOCK_TERMINATION_LOG:-/dev/termination-log}"
dest="${PADDOCK_WORKSPACE:-/workspace}"
if [ -e "$dest/.git" ]; then
  echo "clone: $dest already holds a repository; nothing to do"
  exit 0
fi
args=(clone --single-branch)
[ "${GIT_DEPTH:-1}" != "full" ] && args+=(--depth "${GIT_DEPTH:-1}")
[ -n "${GIT_REF:-}" ] && args+=(--branch "$GIT_REF")
staging="$dest/.paddock-clone"
rm -rf "$staging"
echo "clone: $GIT_URL at ${GIT_REF:-the default branch} (depth ${GIT_DEPTH:-1})"
git -c credential.helper= "${args[@]}" -- "$GIT_URL" "$staging" 2>/tmp/clone.err
status=$?
cat /tmp/clone.err >&2
if [ "$status" -ne 0 ]; then
  {
    echo "clone failed: $GIT_URL at ${GIT_REF:-the default branch}"
    tail -n 5 /tmp/clone.err
  } | _paddock_scrub | head -c 4000 > "$term"
  exit 1
fi
shopt -s dotglob
mv "$staging"/* "$dest"/ && rmdir "$staging"
echo "clone: done"
"""
)


def render_project_script(projection: Projection) -> str:
    """Copy the projected files into /workspace, link CLAUDE.md and GEMINI.md to AGENTS.md,
    install harness configs where the repository has none, and clone git skills."""
    lines = [
        "#!/usr/bin/env bash",
        "# Generated by Paddock: writes instructions, skills and harness configs.",
        "set -euo pipefail",
        'cd "${PADDOCK_WORKSPACE:-/workspace}"',
        'files="${PADDOCK_FILES:-/paddock/files}/project"',
        'if [ -d "$files" ]; then',
        '  cp -rL --no-preserve=mode "$files"/. .',
        "fi",
    ]
    if "AGENTS.md" in projection.files:
        for link in INSTRUCTION_LINKS:
            lines.append(
                f"[ -e {link} ] || ln -s AGENTS.md {link} 2>/dev/null || cp AGENTS.md {link}"
            )
    for target, source in projection.harness_files.items():
        src, dst = shlex.quote(f".paddock/harness/{source}"), shlex.quote(target)
        lines += [
            f"if [ -e {dst} ]; then",
            f"  echo \"project: keeping the repository's {target}; Paddock's is {src}\"",
            "else",
            f'  mkdir -p "$(dirname {dst})" && cp {src} {dst}',
            "fi",
        ]
    for checkout in projection.git_checkouts:
        # Every value from the spec is a quoted word here, never part of the script's code.
        path, name, repo = (shlex.quote(v) for v in (checkout.path, checkout.name, checkout.repo))
        args = "--depth 1 --single-branch"
        if checkout.ref:
            args += f" --branch {shlex.quote(checkout.ref)}"
        token = f"PADDOCK_ASKPASS_TOKEN_VAR={checkout.token_env} " if checkout.token_env else ""
        lines += [
            f"printf 'project: skill %s from %s\\n' {name} {repo}",
            f'rm -rf {path} && mkdir -p "$(dirname {path})"',
            f"{token}git -c credential.helper= clone {args} -- {repo} {path}",
        ]
    lines.append('echo "project: done"')
    return "\n".join(lines) + "\n"
