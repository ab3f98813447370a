"""A sandbox's phase and reason from its pod and PVC, as a kubelet reports them."""

from __future__ import annotations

from datetime import UTC, datetime

from paddock.sandboxes.observe import observe
from support.pods import BOUND, PENDING_PVC, pod, terminated


def test_a_pod_being_created_is_provisioning() -> None:
    seen = observe({"metadata": {"name": "s"}, "spec": {}}, PENDING_PVC)
    assert (seen.phase, seen.reason, seen.volume_bound) == ("Provisioning", "Starting", False)


def test_failed_clone_is_a_permanent_failure_with_the_message() -> None:
    seen = observe(
        pod("Failed", init=[terminated("clone", 1, "clone failed: https://x at main")]), BOUND
    )
    assert (seen.phase, seen.reason) == ("Failed", "CloneFailed")
    assert seen.failed_permanently
    assert seen.message.startswith("clone failed: https://x at main\n")
    assert not seen.recreate_pod


def test_failed_setup_reports_setup_failed() -> None:
    seen = observe(
        pod(
            "Failed",
            init=[
                terminated("clone", 0),
                terminated("project", 0),
                terminated("setup", 2, "setup step failed: x (exit 2)"),
            ],
        ),
        BOUND,
    )
    assert seen.reason == "SetupFailed"
    assert seen.setup_complete is False


def test_running_init_container_is_setting_up() -> None:
    seen = observe(
        pod(init=[terminated("clone", 0), {"name": "setup", "state": {"running": {}}}]), BOUND
    )
    assert (seen.phase, seen.message) == ("SettingUp", "Preparing the workspace: setup.")


def test_image_pull_failure_is_not_permanent() -> None:
    seen = observe(
        pod(
            containers=[
                {
                    "name": "sandbox",
                    "image": "nope:1",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}},
                }
            ]
        ),
        BOUND,
    )
    assert seen.reason == "ImagePullFailed"
    assert "nope:1" in seen.message
    assert not seen.failed_permanently


def test_evicted_pod_is_recreated() -> None:
    seen = observe(pod("Failed", reason="Evicted", message="low on memory"), BOUND)
    assert seen.reason == "PodEvicted"
    assert seen.recreate_pod


def test_unbound_volume_explains_itself() -> None:
    seen = observe(
        pod(
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "message": "0/1 nodes are available: "
                    "pod has unbound immediate PersistentVolumeClaims.",
                }
            ]
        ),
        PENDING_PVC,
    )
    assert seen.reason == "VolumeNotBound"
    assert "spec.storage" in seen.message


def test_running_and_ready_is_ready_with_setup_duration() -> None:
    seen = observe(
        pod(
            "Running",
            init=[terminated("setup", 0)],
            conditions=[
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}
            ],
        ),
        BOUND,
    )
    assert (seen.phase, seen.ready, seen.setup_complete) == ("Ready", True, True)
    assert seen.setup_seconds == 4.0
    assert seen.ready_at == datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
