"""The object-store log's own logic: keys in seq order, the cursor stored with each batch, a
reader starting at the object that holds its seq, and a second writer refused. The bucket here
is a dict (the real server's behaviour is tested in tests/integration/test_object_store_logs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from paddock.objectstore.client import Listed, S3Config
from paddock.objectstore.errors import ObjectExistsError
from paddock.runs import objectlog
from paddock.runs.objectlog import ObjectLog

RUN = {"metadata": {"namespace": "team", "name": "fix-bug", "uid": "1234-abcd"}}


@dataclass
class DictBucket:
    config: S3Config = field(default_factory=lambda: S3Config(bucket="logs", region="eu-west-1"))
    objects: dict[str, tuple[bytes, dict[str, str]]] = field(default_factory=dict)

    def create(self, key: str, data: bytes, metadata: dict[str, str]) -> None:
        if key in self.objects:
            raise ObjectExistsError(f"the object {key} exists already")
        self.objects[key] = (data, metadata)

    def get(self, key: str) -> tuple[bytes, dict[str, str]]:
        return self.objects[key]

    def get_many(self, keys: list[str]) -> list[tuple[bytes, dict[str, str]]]:
        return [self.objects[key] for key in keys]

    def listing(self, prefix: str, after: str | None = None) -> list[Listed]:
        return [
            Listed(key, len(data))
            for key, (data, _) in sorted(self.objects.items())
            if key.startswith(prefix) and (after is None or key > after)
        ]

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            del self.objects[key]


def event(seq: int) -> dict[str, object]:
    return {"seq": seq, "type": "output", "summary": f"line {seq}", "data": {"text": str(seq)}}


def test_each_write_is_an_object_named_by_its_first_seq_with_its_cursor() -> None:
    bucket = DictBucket()
    log = ObjectLog(RUN, bucket, "paddock/runs")
    assert log.load() == ([], {})
    log.append([event(0), event(1)], {"stdout": 20})
    log.append([event(2)], {"stdout": 30, "files": 4})

    assert sorted(bucket.objects) == [
        "paddock/runs/team/fix-bug/1234-abcd/000000000000.jsonl",
        "paddock/runs/team/fix-bug/1234-abcd/000000000002.jsonl",
    ]
    events, cursor = ObjectLog(RUN, bucket, "paddock/runs").load()
    assert [e["seq"] for e in events] == [0, 1, 2]
    assert cursor == {"stdout": 30, "files": 4}  # the last write's, with its events
    assert log.writes == 2
    assert log.location == "s3://logs/paddock/runs/team/fix-bug/1234-abcd/"
    assert log.where().region == "eu-west-1"


def test_a_writer_that_restarts_continues_after_the_last_object() -> None:
    bucket = DictBucket()
    ObjectLog(RUN, bucket, "p").append([event(0), event(1), event(2)], {"stdout": 9})
    again = ObjectLog(RUN, bucket, "p")
    again.load()
    again.append([event(3)], {"stdout": 12})
    events, _ = ObjectLog(RUN, bucket, "p").load()
    assert [e["seq"] for e in events] == [0, 1, 2, 3]


def test_a_second_writer_of_the_same_seq_is_refused_and_the_first_kept() -> None:
    bucket = DictBucket()
    first, second = ObjectLog(RUN, bucket, "p"), ObjectLog(RUN, bucket, "p")
    first.load()
    second.load()
    first.append([event(0)], {"stdout": 5})
    with pytest.raises(ObjectExistsError):
        second.append([event(0)], {"stdout": 7})
    assert ObjectLog(RUN, bucket, "p").load()[1] == {"stdout": 5}


def test_an_edited_log_is_refused_not_read_with_a_gap() -> None:
    bucket = DictBucket()
    log = ObjectLog(RUN, bucket, "p")
    log.append([event(0)], {})
    log.append([event(1)], {})
    del bucket.objects["p/team/fix-bug/1234-abcd/000000000000.jsonl"]
    with pytest.raises(ValueError, match="seq 1 where 0 was expected"):
        ObjectLog(RUN, bucket, "p").load()


@pytest.mark.parametrize(
    ("from_seq", "first"),
    [(0, 0), (3, 0), (4, 4), (5, 4), (9, 9), (50, 9)],
)
def test_a_reader_starts_at_the_object_that_holds_its_seq(from_seq: int, first: int) -> None:
    keys = [objectlog.object_key("r/", seq) for seq in (0, 4, 9)]
    chosen = objectlog.keys_from(list(reversed(keys)), from_seq)
    assert objectlog.first_seq(chosen[0]) == first
    assert chosen == sorted(chosen)


def test_the_run_prefix_separates_runs_of_one_name() -> None:
    again = {"metadata": {**RUN["metadata"], "uid": "5678-efgh"}}
    assert objectlog.run_prefix("/paddock/runs/", RUN) != objectlog.run_prefix(
        "paddock/runs", again
    )
    assert objectlog.run_prefix("", RUN) == "team/fix-bug/1234-abcd/"


def test_a_batch_without_events_takes_no_key_and_the_next_batch_stores_its_cursor() -> None:
    # A run whose first poll brings no output (`sleep 3; echo late`).
    bucket = DictBucket()
    log = ObjectLog(RUN, bucket, "p")
    log.load()
    log.append([], {"stdout": 0, "files": 1})
    assert bucket.objects == {}
    log.append([event(0)], {"stdout": 5, "files": 1})
    log.append([], {"stdout": 5, "files": 2})
    log.append([event(1)], {"stdout": 9, "files": 2})
    events, cursor = ObjectLog(RUN, bucket, "p").load()
    assert [e["seq"] for e in events] == [0, 1]
    assert cursor == {"stdout": 9, "files": 2}
    assert log.writes == 2


def test_a_cli_without_object_store_keys_says_so_and_asks_no_other_credential_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``paddock logs``/``exec`` read an S3 log with the keys they were given, never with the
    SDK's default chain (whose last resort is an instance-metadata address)."""
    from paddock.client import logs

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    where = {"location": "s3://runs/team/fix-bug", "endpoint": "http://127.0.0.1:1"}
    with pytest.raises(logs.ObjectStoreError, match="export AWS_ACCESS_KEY_ID") as caught:
        logs.ObjectReader({"metadata": {}}, where)
    assert "s3://runs/team/fix-bug" in str(caught.value)
