"""Ports for the local cluster's servers: chosen below the ephemeral range, never one that is
bound, never twice in a row from one process."""

from __future__ import annotations

import socket

import pytest

from paddock_dev.processes import (
    PORTS_VARIABLE,
    ClusterError,
    cluster_ports,
    free_ports,
)
from support.ports import SERVERS, worker_share

# Spans of this worker's own share: no other test, worker or cluster binds these meanwhile.
SHARE = worker_share(SERVERS)


def _listening_somewhere_in(ports: range) -> socket.socket:
    for port in ports:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen()
        return sock
    raise AssertionError(f"nothing free in {ports}")


def test_ports_are_distinct_and_from_the_range() -> None:
    span = SHARE[0:400]
    ports = free_ports(("a", "b", "c"), span)
    assert set(ports) == {"a", "b", "c"}
    assert len(set(ports.values())) == 3
    assert all(port in span for port in ports.values())


def test_a_port_something_listens_on_is_never_offered() -> None:
    span = SHARE[400:404]
    with _listening_somewhere_in(span) as taken:
        busy = taken.getsockname()[1]
        offered = [port for _ in range(4) for port in free_ports(("x",), span).values()]
    assert busy not in offered
    assert set(offered) == set(span) - {busy}


def test_a_process_goes_round_the_range_before_offering_a_port_again() -> None:
    span = SHARE[500:520]
    first = free_ports(tuple(f"p{n}" for n in range(10)), span)
    second = free_ports(tuple(f"p{n}" for n in range(10)), span)
    assert not set(first.values()) & set(second.values())


def test_a_range_with_too_few_free_ports_is_an_error_saying_so() -> None:
    span = SHARE[600:601]
    with _listening_somewhere_in(span), pytest.raises(ClusterError, match="fewer than 1 free"):
        free_ports(("x",), span)


def test_the_range_can_be_narrowed_and_a_bad_one_says_how_to_write_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PORTS_VARIABLE, raising=False)
    assert cluster_ports() == range(10000, 20000)
    assert cluster_ports().stop <= 32768  # below the kernel's default ephemeral range
    monkeypatch.setenv(PORTS_VARIABLE, "15000-15099")
    assert cluster_ports() == range(15000, 15100)
    monkeypatch.setenv(PORTS_VARIABLE, "15000")
    with pytest.raises(ClusterError, match="LOW-HIGH"):
        cluster_ports()
