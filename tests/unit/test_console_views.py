"""What the console's pages show, from runs, events, sandboxes and pools (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paddock.api.approvals import DECIDED_BY_ANNOTATION
from paddock.console import views

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
CREATED = "2026-12-04T11:58:30Z"


def _run(name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "creationTimestamp": "2026-12-04T11:58:30Z",
        },
        "spec": {"harness": "claude-code", "sandboxRef": {"name": "box"}},
        "status": status,
    }


@pytest.mark.parametrize(
    ("ago", "shown"),
    [(timedelta(seconds=45), "45s"), (timedelta(minutes=12, seconds=5), "12m"),
     (timedelta(hours=3, minutes=59), "3h"), (timedelta(days=2, hours=1), "2d"),
     (timedelta(seconds=-5), "0s")],
)  # fmt: skip
def test_age_is_printed_as_kubectl_prints_it(ago: timedelta, shown: str) -> None:
    assert views.age((NOW - ago).isoformat(), NOW) == shown
    assert views.age(None, NOW) == ""


def test_a_run_row_counts_waiting_requests_and_shows_usage_where_known() -> None:
    approvals = [{"id": "1", "state": "Pending"}, {"id": "2", "state": "Approved"},
                 {"id": "3", "state": "Pending"}]  # fmt: skip
    usage = {"tokens": 1285, "costUsd": 0.0123}
    row = views.run_row(
        _run("fix", phase="AwaitingApproval", approvals=approvals, usage=usage), NOW
    )
    assert row == views.RunRow(
        name="fix", phase="AwaitingApproval", reason="", harness="claude-code", sandbox="box",
        waiting=2, tokens=1285, cost_usd=0.0123, age="1m",
    )  # fmt: skip
    fresh = views.run_row(_run("new"), NOW)
    assert (fresh.phase, fresh.waiting, fresh.tokens, fresh.cost_usd) == ("Pending", 0, None, None)


def test_a_delivered_run_shows_its_branch_and_links_only_to_a_web_page() -> None:
    delivery = {"branch": "paddock/fix", "commit": "c" * 40,
                "pullRequestUrl": "https://forge.example/o/r/pulls/7"}  # fmt: skip
    row = views.run_row(_run("fix", phase="Succeeded", delivery=delivery), NOW)
    assert (row.delivered_branch, row.pull_request) == (
        "paddock/fix", "https://forge.example/o/r/pulls/7")  # fmt: skip
    sly = {**delivery, "pullRequestUrl": "javascript:alert(document.cookie)"}
    row = views.run_row(_run("fix", phase="Succeeded", delivery=sly), NOW)
    assert (row.delivered_branch, row.pull_request) == ("paddock/fix", None)


def test_a_runs_reason_is_its_complete_conditions_once_ended_else_what_holds_it() -> None:
    denied = [{"type": "Complete", "status": "True", "reason": "ApprovalDenied"}]
    assert (
        views.run_row(_run("a", phase="Failed", conditions=denied), NOW).reason == "ApprovalDenied"
    )
    held = [{"type": "Complete", "status": "False", "reason": "Running"},
            {"type": "WithinBudget", "status": "False", "reason": "BudgetExhausted"}]  # fmt: skip
    assert views.run_row(_run("b", phase="Pending", conditions=held), NOW).reason == "Running"


def test_the_filter_keeps_rows_by_phase_harness_and_part_of_the_name() -> None:
    runs = [_run("fix-login", phase="Running"), _run("Fix-Docs", phase="Succeeded"),
            _run("refactor", phase="Running")]  # fmt: skip
    names = lambda shown: [r.name for r in views.run_rows(runs, NOW, shown)]  # noqa: E731
    assert names(views.RunFilter()) == ["fix-login", "Fix-Docs", "refactor"]
    assert names(views.RunFilter(phase="Running")) == ["fix-login", "refactor"]
    assert names(views.RunFilter(text="fix")) == ["fix-login", "Fix-Docs"]
    assert names(views.RunFilter(harness="codex")) == []


def test_awaiting_approval_is_a_phase_the_runs_list_filters_by() -> None:
    assert "AwaitingApproval" in views.PHASES
    runs = [_run("asks", phase="AwaitingApproval"), _run("runs", phase="Running")]
    shown = views.run_rows(runs, NOW, views.RunFilter(phase="AwaitingApproval"))
    assert [r.name for r in shown] == ["asks"]


def test_the_runs_list_pages_and_names_its_last_page_for_one_past_the_end() -> None:
    runs = [_run(f"r{i:03}") for i in range(views.PAGE_ROWS * 2 + 5)]
    first = views.run_page(runs, NOW, views.RunFilter())
    assert (len(first.rows), first.page, first.pages, first.total) == (views.PAGE_ROWS, 1, 3, 105)
    last = views.run_page(runs, NOW, views.RunFilter(page=9))
    assert (last.page, [r.name for r in last.rows]) == (3, [f"r{i:03}" for i in range(100, 105)])
    assert views.run_page([], NOW, views.RunFilter(page=2)).pages == 1


def test_a_live_runs_list_is_sent_only_the_rows_that_changed() -> None:
    runs = [_run("a", phase="Running"), _run("b", phase="Running")]
    before = views.run_page(runs, NOW, views.RunFilter())
    assert views.changed_rows(None, before) is None  # the first: the whole table
    later = NOW + timedelta(minutes=5)  # every age changed: no change of its own
    assert views.changed_rows(before, views.run_page(runs, later, views.RunFilter())) == []
    one = [_run("a", phase="Succeeded"), _run("b", phase="Running")]
    changed = views.changed_rows(before, views.run_page(one, NOW, views.RunFilter()))
    assert [(r.name, r.phase) for r in changed or []] == [("a", "Succeeded")]
    # A run more, or one gone from the filter's rows: the whole table again.
    more = [_run("c"), *runs]
    assert views.changed_rows(before, views.run_page(more, NOW, views.RunFilter())) is None
    running = views.RunFilter(phase="Running")
    assert (
        views.changed_rows(views.run_page(runs, NOW, running), views.run_page(one, NOW, running))
        is None
    )


def test_requests_list_pending_first_then_decided_newest_first_with_who_decided() -> None:
    run = _run("r", approvals=[
        {"id": "a", "kind": "command", "target": "rm -rf x", "rules": ["ask: rm *"],
         "state": "Denied", "message": "denied"},
        {"id": "b", "kind": "network", "target": "example.com", "state": "Approved"},
        {"id": "c", "kind": "file-write", "target": ".env", "state": "Pending"},
    ])  # fmt: skip
    run["metadata"]["annotations"] = {f"{DECIDED_BY_ANNOTATION}a": "alice"}
    listed = views.requests(run)
    assert [(r.id, r.state) for r in listed] == [
        ("c", "Pending"),
        ("b", "Approved"),
        ("a", "Denied"),
    ]
    assert listed[2].decided_by == "alice"
    assert listed[2].rules == ("ask: rm *",)
    assert listed[1].decided_by is None


def _event(kind: str, summary: str = "", **data: Any) -> dict[str, Any]:
    return {"seq": 7, "time": "2026-12-04T11:59:01.123Z", "type": kind, "summary": summary,
            "data": data}  # fmt: skip


def test_timeline_items_fold_tool_input_and_output_and_show_a_files_diff() -> None:
    call = views.item(_event("tool.call", "Bash: ls", name="Bash", input={"command": "ls"}))
    assert (call.seq, call.clock, call.style, call.title) == (
        7,
        "11:59:01",
        "tool",
        "tool call: Bash: ls",
    )
    assert '"command": "ls"' in call.folded
    assert call.text == ""
    failed = views.item(_event("tool.result", "", output="boom\nline two", isError=True))
    assert (failed.title, failed.text, failed.folded) == ("tool error", "boom", "boom\nline two")
    files = [{"path": "a.py", "status": "modified"}]
    changed = views.item(_event("file.changed", "1 file(s) changed", files=files, diff="+x"))
    assert (changed.style, changed.files, changed.folded) == ("file", ("modified a.py",), "+x")
    said = views.item(_event("message", "hi", text="hello there"))
    assert (said.style, said.text) == ("message", "hello there")
    ended = views.item(_event("run.failed", "denied"))
    assert (ended.style, ended.title, ended.text) == ("end", "run.failed", "denied")
    assert views.item(_event("something.new", "x")).style == "notice"


def test_a_huge_output_is_folded_bounded() -> None:
    shown = views.item(_event("tool.result", "", output="y" * (views.MAX_SHOWN + 10))).folded
    assert shown.startswith("y" * views.MAX_SHOWN)
    assert shown.endswith("(10 more characters: paddock logs)")


def test_sandbox_and_pool_rows() -> None:
    sandbox = {
        "metadata": {"name": "box", "creationTimestamp": "2026-12-04T09:00:00Z"},
        "spec": {"workspaceRef": {"name": "app"}},
        "status": {"phase": "Ready", "policy": "team/strict", "restoredFrom": "snap-1"},
    }
    assert views.sandbox_row(sandbox, NOW) == views.SandboxRow(
        name="box", phase="Ready", reason="", workspace="app", policy="team/strict",
        restored_from="snap-1", age="3h",
    )  # fmt: skip
    pool = {"metadata": {"name": "warm"},
            "spec": {"replicas": 3, "template": {"workspaceRef": {"name": "app"}}},
            "status": {"replicas": 3, "readyReplicas": 2, "claimed": 4}}  # fmt: skip
    assert views.pool_row(pool) == views.PoolRow("warm", "app", 3, 2, 3, 4)
