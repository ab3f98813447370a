"""The published sandbox image (images/sandbox/Dockerfile) and the one the local cluster builds
without Docker for its real node (paddock_dev/images.py) install the same things: the Debian
suite and packages, Node.js's version, the agent CLIs' pins, the user and the PATH.
(tests/e2e/test_real_node_examples.py runs the local build and asks each CLI its version.)"""

from __future__ import annotations

import json
import re

from paddock_dev import images
from paddock_dev.binaries import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "images" / "sandbox" / "Dockerfile").read_text()
# Instructions with their continuation lines joined, comments dropped.
INSTRUCTIONS = re.sub(r"\\\n\s*", " ", re.sub(r"(?m)^\s*#.*\n", "", DOCKERFILE)).splitlines()


def instruction(keyword: str) -> list[str]:
    return [line.split(None, 1)[1] for line in INSTRUCTIONS if line.startswith(f"{keyword} ")]


def test_node_and_the_debian_suite_are_the_local_builds() -> None:
    (node_arg,) = [a for a in instruction("ARG") if a.startswith("NODE_VERSION=")]
    assert node_arg == f"NODE_VERSION={images.NODE_VERSION}"
    assert instruction("FROM") == [f"node:${{NODE_VERSION}}-{images.DEBIAN_SUITE}-slim"]


def test_the_debian_packages_are_the_local_builds() -> None:
    (install,) = [r for r in instruction("RUN") if "apt-get install" in r]
    listed = install.split("--no-install-recommends", 1)[1].split("&&", 1)[0].split()
    assert sorted(listed) == sorted(images.SANDBOX_PACKAGES)


def test_the_agent_clis_come_from_the_pins_the_local_build_installs() -> None:
    directory = f"/{images.AGENT_CLIS_DIR}"
    assert instruction("WORKDIR")[0] == directory
    source = images.AGENT_CLIS_PACKAGE.relative_to(REPO_ROOT)
    assert instruction("COPY") == [f"{source} ./"]
    assert any(r.startswith("npm install --omit=dev") for r in instruction("RUN"))
    assert instruction("ENV") == [f"PATH={directory}/node_modules/.bin:$PATH"]
    pins = json.loads(images.AGENT_CLIS_PACKAGE.read_text())["dependencies"]
    assert set(pins) == {"@anthropic-ai/claude-code", "@openai/codex", "opencode-ai",
                         "@google/gemini-cli"}  # fmt: skip
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", version) for version in pins.values()), pins


def test_the_user_and_working_directory_are_the_sandbox_pods() -> None:
    assert instruction("USER") == [f"{images.SANDBOX_UID}:{images.SANDBOX_UID}"]
    assert instruction("WORKDIR")[-1] == "/workspace"
    (rename,) = [r for r in instruction("RUN") if "usermod" in r]
    assert "--login paddock" in rename


def test_the_image_is_labelled() -> None:
    (labels,) = instruction("LABEL")
    for key in ("title", "description", "source", "licenses", "version"):
        assert f"org.opencontainers.image.{key}=" in labels
