"""Validated string types the kinds share: durations, git refs and URLs, workspace paths.
Each is checked twice, alike: by the model (the operator) and by a CEL rule in the CRD (the API
server), with the same message."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, WithJsonSchema

from paddock.api.common import cel, validations

# --- durations -------------------------------------------------------------------------------

DURATION_PATTERN = r"^[1-9][0-9]{0,8}[smhd]$"
MAX_DURATION_SECONDS = 3650 * 86400  # ten years: no deadline computed from one overflows
DURATION_MESSAGE = (
    "must be a duration: a whole number and one unit s, m, h or d, e.g. 90s, 30m, 24h, 7d, "
    "of at most 3650d"
)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION_RULE = (
    f"self.matches('{DURATION_PATTERN}') && int(self.substring(0, size(self) - 1)) * "
    "(self.endsWith('d') ? 86400 : self.endsWith('h') ? 3600 : self.endsWith('m') ? 60 : 1) "
    f"<= {MAX_DURATION_SECONDS}"
)


def parse_duration(value: str) -> timedelta:
    """``"90s"`` -> 90 seconds. One whole number and one unit, at most ten years; anything
    else is an error.

    The seed library accepted only ``<n>h``/``<n>m`` and silently ignored the rest; a duration
    that does not parse here is always an error the user sees.
    """
    if not re.fullmatch(DURATION_PATTERN, value):
        raise ValueError(DURATION_MESSAGE)
    seconds = int(value[:-1]) * _UNIT_SECONDS[value[-1]]
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(DURATION_MESSAGE)
    return timedelta(seconds=seconds)


def _check_duration(value: str) -> str:
    parse_duration(value)
    return value


Duration = Annotated[
    str,
    AfterValidator(_check_duration),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": 12,
            "x-kubernetes-validations": [cel(_DURATION_RULE, DURATION_MESSAGE)],
        }
    ),
]


def _no_leading_dash(value: str) -> str:
    # A value that starts with "-" would be read by git as an option (argument injection).
    if value.startswith("-"):
        raise ValueError("must not start with '-'")
    return value


NO_DASH_RULE = cel("!self.startsWith('-')", "must not start with '-'")

NoDashString = Annotated[
    str,
    AfterValidator(_no_leading_dash),
    Field(min_length=1, max_length=2048, json_schema_extra=validations(NO_DASH_RULE)),
]


def cel_matches(regex: str) -> str:
    """``self.matches(...)`` for a regex, escaped as a CEL string literal. The regex is RE2 on
    the API server and Python's ``re`` in the models: keep to what both read alike."""
    literal = regex.replace("\\", "\\\\").replace("'", "\\'")
    return f"self.matches('{literal}')"


# Control characters (a newline above all) would let a value end one line of a generated
# script or a git config and begin another.
_CONTROL = r"[\x00-\x1f\x7f]"
ONE_LINE_MESSAGE = "must be one line, without control characters"


def _one_line(value: str) -> str:
    if re.search(_CONTROL, value):
        raise ValueError(ONE_LINE_MESSAGE)
    return value


GIT_REF_MESSAGE = (
    "must be a branch, tag or commit name: no spaces, control characters or any of ~^:?*[\\"
)
_GIT_REF_BAD = r"[\s~^:?*\[\\\x00-\x1f\x7f]"


def _git_ref(value: str) -> str:
    if re.search(_GIT_REF_BAD, value):
        raise ValueError(GIT_REF_MESSAGE)
    return _no_leading_dash(value)


GitRef = Annotated[
    str,
    AfterValidator(_git_ref),
    Field(
        min_length=1,
        max_length=256,
        json_schema_extra=validations(
            NO_DASH_RULE, cel(f"!{cel_matches(_GIT_REF_BAD)}", GIT_REF_MESSAGE)
        ),
    ),
]

URL_CREDENTIALS_MESSAGE = (
    "the URL must not carry credentials (user:token@host, or a token, key or password in the "
    "query); put the credential in a Secret and name it in secretRef"
)
# An "@" in the authority part, or a query parameter named like a credential.
_URL_USERINFO = r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@"
_URL_QUERY_CREDENTIAL = r"(?i)[?&;][^=&#]*(token|secret|passw|credential|auth|key|sig)[^=&#]*="


CLONE_URL_MESSAGE = (
    "the URL must be https://, http://, git://, file:// or a path: an ssh source (ssh://, "
    "user@host:path, host:path) cannot be cloned (the sandbox has no ssh client, and secretRef "
    "holds a token, not a key), nor a remote helper's (ext::, fd::)"
)
# What git clones without ssh or a remote helper: a URL of these schemes, or a path (one that
# starts with / or ., or holds no colon; git reads anything else with a colon before any slash
# as host:path, over ssh, and SCHEME::ADDRESS as a remote helper's).
_CLONE_URL = r"^((https?|git|file)://|[/.]|[^:]*$)"


def clone_url(url: str) -> str:
    if not re.search(_CLONE_URL, url):
        raise ValueError(CLONE_URL_MESSAGE)
    return url


def clone_url_rule(field: str) -> dict[str, str]:
    """The CEL rule of ``clone_url`` on a model's ``field`` (reported at that field)."""
    return cel(
        cel_matches(_CLONE_URL).replace("self.", f"self.{field}.", 1),
        CLONE_URL_MESSAGE,
        f".{field}",
    )


def _no_credentials(url: str) -> str:
    if re.search(_URL_USERINFO, url) or re.search(_URL_QUERY_CREDENTIAL, url):
        raise ValueError(URL_CREDENTIALS_MESSAGE)
    return url


UrlWithoutCredentials = Annotated[
    str,
    AfterValidator(_no_leading_dash),
    AfterValidator(_one_line),
    AfterValidator(_no_credentials),
    Field(
        min_length=1,
        max_length=2048,
        json_schema_extra=validations(
            NO_DASH_RULE,
            cel(f"!{cel_matches(_CONTROL)}", ONE_LINE_MESSAGE),
            cel(
                f"!{cel_matches(_URL_USERINFO)} && !{cel_matches(_URL_QUERY_CREDENTIAL)}",
                URL_CREDENTIALS_MESSAGE,
            ),
        ),
    ),
]

PATH_ESCAPE_MESSAGE = (
    "must be a path inside the workspace: relative, without '.', '..' or empty parts, on one line"
)
_PATH_ESCAPE = r"^/|(^|/)[.][.]?(/|$)|//|/$|" + _CONTROL


def _inside_workspace(path: str) -> str:
    if re.search(_PATH_ESCAPE, path):
        raise ValueError(PATH_ESCAPE_MESSAGE)
    return path


WorkspacePath = Annotated[
    str,
    AfterValidator(_inside_workspace),
    Field(
        min_length=1,
        max_length=1024,
        json_schema_extra=validations(cel(f"!{cel_matches(_PATH_ESCAPE)}", PATH_ESCAPE_MESSAGE)),
    ),
]
