"""The local cluster's tooling is a distribution of its own (devtools/, paddock-dev): the
operator's distribution, whose wheel its image installs, holds none of it and never imports it
(import-linter says the second); ``paddock cluster`` and ``paddock dev`` come from paddock-dev's
entry point, so a ``paddock`` without it has neither."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
from setuptools import find_packages

from paddock.cli import main
from support.kube import ROOT


def test_the_operators_distribution_holds_no_dev_tooling() -> None:
    # What Paddock's wheel packages: every package setuptools finds under operator/.
    packaged = find_packages(str(ROOT / "operator"))
    assert "paddock" in packaged
    assert not [p for p in packaged if not p.startswith("paddock.") and p != "paddock"]
    assert not [p for p in packaged if "devcluster" in p]
    (plugin,) = entry_points(group="paddock.commands")
    assert plugin.dist is not None
    assert plugin.dist.name == "paddock-dev"


def test_paddock_offers_the_cluster_commands_only_through_the_plugin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    commands = main.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"cluster", "dev"} <= set(commands)
    monkeypatch.setattr(main, "entry_points", lambda group: [])
    without = main.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert not {"cluster", "dev"} & set(without)
    assert {"run", "logs", "operator"} <= set(without)


def test_a_plugin_that_does_not_load_takes_no_other_command_away(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Broken:
        value = "gone.module:add"

        def load(self) -> None:
            raise ImportError("No module named 'gone'")

    monkeypatch.setattr(main, "entry_points", lambda group: [Broken()])
    commands = main.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"run", "logs", "operator"} <= set(commands)
    assert "commands of gone.module:add not loaded" in capsys.readouterr().err
