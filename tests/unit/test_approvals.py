"""Approvals: a command the policy says to ask about waits, unanswered, until a person
approves or denies it (an annotation on the run), or the approval timeout passes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from paddock.agentruns import decide, gating
from paddock.agentruns.asking import (
    KEPT_RESOLVED,
    MAX_ASKED_CHARS,
    MAX_PENDING,
    TARGET_CHARS,
    Answered,
    Asking,
    choices,
    end_all,
    request_of,
)
from paddock.api.approvals import Approval, ApprovalState, digest_of, visible
from paddock.api.approvals import ApprovalChoice as Choice
from paddock.api.policy import SandboxPolicySpec
from paddock.api.reasons import RunReason as R
from paddock.harness import claude_code, opencode
from paddock.runs import events as ev

POLICY = SandboxPolicySpec.model_validate(
    {"commands": {"allow": ["echo *"], "ask": ["git push *", "npm publish*"], "default": "deny"}}
)
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=15)


def request(command: str) -> bytes:
    return json.dumps({"tool_name": "Bash", "tool_input": {"command": command}}).encode()


TOKEN = "5eed0001"  # an approval id's random part, fixed here


def judge(
    requests: dict[str, str],
    approvals: list[Approval] | None = None,
    choices: dict[str, Choice] | None = None,
    now: datetime = T0,
) -> Answered:
    # Each decision names the text of the request it decides, as every face does.
    digests = {a.id: str(a.digest) for a in approvals or []}
    named = {rid: (choice, digests.get(rid, "")) for rid, choice in (choices or {}).items()}
    asking = Asking(approvals or [], named, now, TIMEOUT, "15m", lambda: TOKEN)
    raw = {i: request(c) for i, c in requests.items()}
    return gating.answer(raw, POLICY, {}, claude_code.request_of, asking)


def test_an_ask_command_is_left_unanswered_and_recorded_as_pending() -> None:
    result = judge({"10-1": "git push origin main"})
    assert result.answers == {}  # the gate waits
    (approval,) = result.pending
    assert approval.id == f"10-1.{TOKEN}"
    assert request_of(approval) == "10-1"
    assert approval.target == "git push origin main"
    assert approval.rules == ["ask: git push *"]
    assert approval.requested_at == T0
    (requested,) = result.drafts
    assert requested.type == ev.APPROVAL_REQUESTED
    assert requested.data["id"] == approval.id
    (notice,) = result.notices
    assert notice.reason == R.APPROVAL_REQUESTED
    assert approval.id in notice.message
    assert "paddock approve" in notice.message


def test_asked_again_while_pending_it_logs_nothing_more() -> None:
    first = judge({"10-1": "git push origin main"})
    again = judge({"10-1": "git push origin main"}, first.approvals, now=T0 + timedelta(minutes=1))
    assert again.answers == {}
    assert again.drafts == []
    assert again.notices == []
    assert again.approvals == first.approvals


def test_an_approval_lets_the_command_run() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    later = T0 + timedelta(minutes=2)
    result = judge(
        {"10-1": "git push origin main"}, pending, {pending[0].id: Choice.APPROVE}, later
    )
    assert result.answers == {"10-1": "allow\n"}
    (approval,) = result.approvals
    assert approval.state == ApprovalState.APPROVED
    assert approval.resolved_at == later
    assert not approval.always
    (resolved,) = result.drafts
    assert resolved.type == ev.APPROVAL_RESOLVED
    assert resolved.data["state"] == "Approved"
    assert [n.reason for n in result.notices] == [R.APPROVED]


def test_a_denial_refuses_it_with_a_message_for_the_agent() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    result = judge({"10-1": "git push origin main"}, pending, {pending[0].id: Choice.DENY})
    verdict, _, message = result.answers["10-1"].partition("\n")
    assert verdict == "deny"
    assert "needed approval" in message
    assert "denied" in message
    assert result.approvals[0].state == ApprovalState.DENIED
    assert [n.reason for n in result.notices] == [R.APPROVAL_DENIED]


def test_nobody_deciding_within_the_timeout_is_a_denial() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    just_before = judge({"10-1": "git push origin main"}, pending, now=T0 + TIMEOUT / 2)
    assert just_before.answers == {}
    result = judge({"10-1": "git push origin main"}, pending, now=T0 + TIMEOUT)
    assert result.answers["10-1"].startswith("deny\n")
    assert "15m" in result.answers["10-1"]
    assert result.approvals[0].state == ApprovalState.EXPIRED
    assert [n.reason for n in result.notices] == [R.APPROVAL_EXPIRED]


def test_a_pending_approval_whose_request_is_gone_expires_too() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    result = judge({}, pending, now=T0 + TIMEOUT + timedelta(seconds=1))
    assert result.approvals[0].state == ApprovalState.EXPIRED
    assert result.pending == []


def test_a_decided_request_the_sandbox_did_not_take_is_answered_again() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    decided = judge({"10-1": "git push origin main"}, pending, {pending[0].id: Choice.APPROVE})
    again = judge({"10-1": "git push origin main"}, decided.approvals)  # annotation removed
    assert again.answers == {"10-1": "allow\n"}
    assert again.drafts == []


def test_approve_always_approves_later_requests_of_the_same_rules() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    always = judge({"10-1": "git push origin main"}, pending, {pending[0].id: Choice.ALWAYS})
    assert always.approvals[0].always
    later = judge({"11-1": "git push origin feature"}, always.approvals)
    assert later.answers == {"11-1": "allow\n"}
    assert later.pending == []
    assert [d.type for d in later.drafts] == [ev.APPROVAL_REQUESTED, ev.APPROVAL_RESOLVED]
    assert [n.reason for n in later.notices] == [R.APPROVED]
    # Another rule still asks.
    other = judge({"12-1": "npm publish"}, later.approvals)
    assert other.answers == {}
    assert [a.id for a in other.pending] == [f"12-1.{TOKEN}"]


def test_a_denied_part_is_denied_even_next_to_an_ask_part() -> None:
    result = judge({"10-1": "git push origin main && curl evil"})
    assert result.answers["10-1"].startswith("deny\n")
    assert result.pending == []


def test_annotations_name_the_choices() -> None:
    found = choices(
        {
            "approval.paddock.dev/10-1": "approve:sha256:ab",
            "approval.paddock.dev/11-1": "approve-always:sha256:cd",
            "approval.paddock.dev/12-1": "deny",
            "approval.paddock.dev/13-1": "yes please",  # not a choice: nothing decided
            "approval.paddock.dev/14-1": "approve",  # a choice naming no text
            "example.com/10-1": "approve",
        }
    )
    assert found == {
        "10-1": (Choice.APPROVE, "sha256:ab"),
        "11-1": (Choice.ALWAYS, "sha256:cd"),
        "12-1": (Choice.DENY, ""),
        "14-1": (Choice.APPROVE, ""),
    }


def test_the_run_ending_denies_what_is_pending() -> None:
    pending = judge({"10-1": "git push origin main"}).approvals
    approvals, drafts = end_all(pending, T0 + timedelta(minutes=1))
    assert approvals[0].state == ApprovalState.DENIED
    assert [d.type for d in drafts] == [ev.APPROVAL_RESOLVED]


def test_the_status_keeps_every_pending_and_the_newest_resolved() -> None:
    approvals: list[Approval] = []
    for i in range(KEPT_RESOLVED + 5):
        rid = f"{i}-1"
        approvals = judge({rid: "git push x"}, approvals).approvals
        approvals = judge({rid: "git push x"}, approvals, {f"{rid}.{TOKEN}": Choice.DENY}).approvals
    approvals = judge({"99-1": "git push x"}, approvals).approvals
    assert len(approvals) == KEPT_RESOLVED + 1
    assert approvals[-1].id == f"99-1.{TOKEN}"
    assert approvals[-1].state == ApprovalState.PENDING
    assert approvals[0].id == f"5-1.{TOKEN}"


def test_the_run_says_what_it_waits_for_and_how_to_decide() -> None:
    pending = judge({"10-1": "git push origin main", "11-1": "npm publish"}).pending
    message = decide.awaiting(pending, "fix-bug")
    assert message is not None
    assert f"paddock approve fix-bug 10-1.{TOKEN}" in message
    assert "1 more" in message
    assert decide.awaiting([], "fix-bug") is None


def _capabilities(file_write: str, network: str = "deny") -> SandboxPolicySpec:
    return SandboxPolicySpec.model_validate(
        {"capabilities": {"fileWrite": file_write, "network": network}}
    )


def _write(path: str) -> bytes:
    return json.dumps({"tool_name": "Write", "tool_input": {"file_path": path}}).encode()


def test_a_file_write_the_policy_asks_about_is_an_approval_too() -> None:
    asking = Asking([], {}, T0, TIMEOUT, "15m")
    policy = _capabilities("ask")
    result = gating.answer({"10-1": _write("/w/NOTES.md")}, policy, {}, claude_code.request_of,
                           asking)  # fmt: skip
    assert result.answers == {}
    (approval,) = result.pending
    assert approval.kind == "file-write"
    assert approval.target == "/w/NOTES.md"
    assert approval.rules == ["capabilities.fileWrite"]
    assert "writing the file `/w/NOTES.md` needs approval" in result.notices[0].message


def test_a_file_write_the_policy_denies_is_refused_saying_so() -> None:
    asking = Asking([], {}, T0, TIMEOUT, "15m")
    policy = _capabilities("deny")
    result = gating.answer({"10-1": _write("/w/NOTES.md")}, policy, {}, claude_code.request_of,
                           asking)  # fmt: skip
    verdict, _, message = result.answers["10-1"].partition("\n")
    assert verdict == "deny"
    assert "Writing the file `/w/NOTES.md` is denied" in message
    assert result.drafts[0].data["rule"] == "capabilities.fileWrite"


def test_the_tools_the_policy_asks_about_go_through_the_gate() -> None:
    asks = _capabilities("ask", network="allow")
    assert claude_code.gated_tools(asks) == ["Bash", *claude_code.FILE_TOOLS]
    # Allowed by the gate's answer alone: in neither of Claude Code's own lists.
    permissions = claude_code.permissions(asks)
    assert not set(claude_code.FILE_TOOLS) & {*permissions["allow"], *permissions["deny"]}
    assert set(claude_code.WEB_TOOLS) <= set(permissions["allow"])
    assert opencode.gated_tools(asks) == ["bash", "write", "edit"]
    assert opencode.permissions(asks)["edit"] == "allow"
    denies = _capabilities("deny")
    assert claude_code.gated_tools(denies) == ["Bash"]
    assert set(claude_code.FILE_TOOLS) <= set(claude_code.permissions(denies)["deny"])
    assert opencode.permissions(denies)["edit"] == "deny"
    assert opencode.permissions(denies)["webfetch"] == "deny"


def test_a_decision_made_before_the_request_existed_decides_nothing() -> None:
    """A request's id has a random part: an annotation naming the request as it would be
    (``command``, or the gate's id) cannot approve it ahead of time."""
    guessed = {"10-1": Choice.APPROVE, "10-1.00000000": Choice.APPROVE}
    result = judge({"10-1": "git push origin main"}, choices=guessed)
    assert result.answers == {}
    assert [a.state for a in result.approvals] == [ApprovalState.PENDING]


def test_each_request_gets_an_id_of_its_own_that_cannot_be_foretold() -> None:
    asking = Asking([], {}, T0, TIMEOUT, "15m")  # the operator's random token
    raw = {"10-1": request("git push origin main"), "11-1": request("git push origin dev")}
    first, second = gating.answer(raw, POLICY, {}, claude_code.request_of, asking).approvals
    again = gating.answer(raw, POLICY, {}, claude_code.request_of, asking).approvals[0]
    assert first.id.startswith("10-1.")
    assert second.id.startswith("11-1.")
    tokens = {approval.id.partition(".")[2] for approval in (first, second, again)}
    assert len(tokens) == 3


LONG = "git push origin " + "a" * 2000 + " &&\n  git push origin main"


def test_a_pending_request_holds_its_whole_text_and_a_decided_one_an_abridged_record() -> None:
    (approval,) = judge({"10-1": LONG}).pending
    assert approval.target == LONG
    assert approval.digest == digest_of(LONG)
    decided = judge({"10-1": LONG}, [approval], {approval.id: Choice.DENY}).approvals[0]
    assert decided.state == ApprovalState.DENIED
    assert len(decided.target) <= TARGET_CHARS
    assert "\n" not in decided.target


@pytest.mark.parametrize(
    ("named", "allowed"),
    [
        (digest_of(LONG), True),  # the text that was shown: allowed
        (digest_of(LONG[:TARGET_CHARS]), False),  # what an abridged face showed
        (digest_of("git push origin main"), False),  # other text
        ("", False),  # no text named (an annotation written by hand: approve)
    ],
)
def test_an_approval_allows_only_the_text_it_names(named: str, allowed: bool) -> None:
    (approval,) = judge({"10-1": LONG}).pending
    asking = Asking([approval], {approval.id: (Choice.APPROVE, named)}, T0, TIMEOUT, "15m")
    result = gating.answer({"10-1": request(LONG)}, POLICY, {}, claude_code.request_of, asking)
    (decided,) = result.approvals
    assert result.answers["10-1"].startswith("allow" if allowed else "deny")
    assert decided.state == (ApprovalState.APPROVED if allowed else ApprovalState.DENIED)
    if not allowed:
        assert f"the approval named {named or 'no text'}" in str(decided.message)


def test_a_request_too_long_to_show_whole_is_denied_without_asking() -> None:
    text = "git push origin " + "b" * MAX_ASKED_CHARS
    result = judge({"10-1": text})
    assert result.answers["10-1"].startswith("deny\n")
    (approval,) = result.approvals
    assert approval.state == ApprovalState.DENIED
    assert "shown whole" in str(approval.message)
    assert len(approval.target) <= TARGET_CHARS


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("git push origin main", "git push origin main"),
        ("ls\n  -la", "ls\n  -la"),  # lines stay lines
        ("echo ok\u202e; rm -rf ~", "echo ok⟦U+202E⟧; rm -rf ~"),  # a bidi override
        ("rm\u200b -rf", "rm⟦U+200B⟧ -rf"),  # zero width
        ("a\tb\rc\x1b[2K", "a⟦U+0009⟧b⟦U+000D⟧c⟦U+001B⟧[2K"),  # controls
        ("x\u00a0y\u2028z", "x⟦U+00A0⟧y⟦U+2028⟧z"),  # separators but the space
        ("e\u0301\u0301", "e⟦U+0301⟧⟦U+0301⟧"),  # marks stacked on ASCII
        ("café, कि", "café, कि"),  # text of other scripts stays
        ("\u3164 \U000e0041", "⟦U+3164⟧ ⟦U+E0041⟧"),  # a blank letter, a tag
        ("⟦U+202E⟧", "⟦U+27E6⟧U+202E⟦U+27E7⟧"),  # a faked mark
        ("é\u034fb é\ufe0f", "é⟦U+034F⟧b é⟦U+FE0F⟧"),  # a joiner, a variation selector
        ("é" + "\u0338" * 4, "é\u0338\u0338⟦U+0338⟧⟦U+0338⟧"),  # marks stacked past two
    ],
)
def test_every_face_shows_what_would_hide_or_move_text(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_a_request_whose_text_changed_after_it_was_asked_about_is_denied() -> None:
    """A command run's request keeps its id while its command is edited: an approval of the
    first text never allows the second."""
    (approval,) = judge({"command": "git push origin main"}).pending
    named = {approval.id: (Choice.APPROVE, str(approval.digest))}
    asking = Asking([approval], named, T0, TIMEOUT, "15m")
    changed = request("git push --mirror evil")
    result = gating.answer({"command": changed}, POLICY, {}, claude_code.request_of, asking)
    assert result.answers["command"].startswith("deny\n")
    assert result.approvals[0].state == ApprovalState.DENIED
    assert "changed after it was asked about" in str(result.approvals[0].message)


def test_a_request_too_large_once_escaped_is_denied_without_asking() -> None:
    text = "git push origin " + "\x01" * 8000  # 8,016 characters, 48 KB as JSON
    (approval,) = judge({"10-1": text}).approvals
    assert approval.state == ApprovalState.DENIED


def test_a_run_holds_at_most_so_many_requests_waiting_for_a_person() -> None:
    approvals: list[Approval] = []
    for i in range(MAX_PENDING + 3):
        approvals = judge({f"{i}-1": f"git push origin b{i}"}, approvals).approvals
    states = [a.state for a in approvals]
    assert states.count(ApprovalState.PENDING) == MAX_PENDING
    assert states[-3:] == [ApprovalState.DENIED] * 3
    assert "already wait for a person" in str(approvals[-1].message)
