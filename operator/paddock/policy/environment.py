"""Variables that decide what runs: ``GIT_SSH_COMMAND='curl x' git fetch`` runs curl, and
``BASH_ENV=f bash -c ls`` the code of ``f``. An assignment of such a variable, in any form
(leading, alone, exported, given to ``env``, ``read`` or a loop), is judged by the command it
names, or denied where what it makes run cannot be told (a config, a file of code, a search
path)."""

from __future__ import annotations

from paddock.policy.outcomes import Runs, Shell, Unknown

# Variables whose value is a command a program runs (through a shell, for most).
PROGRAMS = frozenset(
    {"GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR",
     "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "SSH_ASKPASS", "SUDO_ASKPASS",
     "PAGER", "MANPAGER", "EDITOR", "VISUAL", "BROWSER", "npm_config_script_shell",
     "npm_config_shell", "npm_config_editor", "npm_config_browser", "npm_config_git", "FCEDIT",
     "RSYNC_RSH", "RSYNC_CONNECT_PROG", "CVS_RSH", "SVN_SSH", "LESSOPEN", "LESSCLOSE", "CC",
     "CXX", "CPP", "AR", "LD", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER"}
)  # fmt: skip
# Variables that name code to load, a config that may name programs, or where programs are
# found: what they make run cannot be told from the command.
DENIED = frozenset(
    {"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS",
     "BASHOPTS", "POSIXLY_CORRECT",
     "VALGRIND_LIB", "BASH_LOADABLES_PATH", "EXECIGNORE", "HOME", "XDG_CONFIG_HOME",
     "ZDOTDIR", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB",
     "PYTHONSTARTUP", "PYTHONINSPECT", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
     "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKEFILES", "GCONV_PATH", "SSH_CONFIG",
     "CARGO_HOME", "DOTNET_STARTUP_HOOKS", "BASH_ALIASES", "BASH_CMDS", "SHELL", "KUBECONFIG",
     "AWS_CONFIG_FILE", "DOCKER_CONFIG",
     "GOFLAGS", "PHPRC", "PHP_INI_SCAN_DIR", "TAR_OPTIONS"}
)  # fmt: skip
DENIED_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "PERL5", "CARGO_TARGET_")
# Git reads a config, hooks or programs through most GIT_* variables; these it does not.
GIT_HARMLESS = frozenset(
    {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
     "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_TRACE",
     "GIT_CURL_VERBOSE", "GIT_OPTIONAL_LOCKS", "GIT_LFS_SKIP_SMUDGE", "GIT_FLUSH",
     "GIT_PROGRESS_DELAY", "GIT_LITERAL_PATHSPECS", "GIT_NO_REPLACE_OBJECTS", "GIT_MERGE_VERBOSITY"}
)  # fmt: skip
# npm reads every npm_config_* (any case) as a config key; these name no program or file.
NPM_HARMLESS = frozenset(
    {"registry", "loglevel", "cache", "fund", "audit", "progress", "color", "yes", "offline",
     "prefer_offline", "prefer-offline", "update_notifier", "update-notifier", "save",
     "save_exact", "save-exact", "legacy_peer_deps", "legacy-peer-deps", "production"}
)  # fmt: skip


def effect(name: str, value: str | None) -> Runs | Unknown | None:
    """What assigning ``value`` (None: only known at run time) to ``name`` makes run: a
    command to judge, a denial, or None when the variable decides nothing."""
    if name in PROGRAMS or name.lower() in {p.lower() for p in PROGRAMS if p.startswith("npm")}:
        if value is None:
            return Unknown(f"{name} names a program only known at run time")
        return Runs(script=value, shell=Shell.EITHER) if value.strip() else None
    if name == "PATH":  # a later command's name may run a program of another directory
        return Unknown("PATH decides which program each later command name runs", program=True)
    if _decides(name):
        return Unknown(f"{name} decides what programs run or what code they load")
    return None


def _decides(name: str) -> bool:
    if name in DENIED or name.startswith(DENIED_PREFIXES):
        return True
    if name.startswith("GIT_"):
        return name not in GIT_HARMLESS and not name.startswith("GIT_TRACE")
    lowered = name.lower()
    if lowered.startswith("npm_config_"):
        return lowered.removeprefix("npm_config_") not in NPM_HARMLESS
    return False
