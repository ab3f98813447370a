"""An archive's secret values masked on the way to the store: real GNU tar archives (gnu and
pax formats, long names, links, a file larger than a piece) pass through ``MaskingSink`` in
pieces cut anywhere, and real tar unpacks the result."""

from __future__ import annotations

import base64
import gzip
import io
import random
import subprocess
from pathlib import Path

import pytest

from paddock.sandboxes.archive_masking import MaskingSink, masked_forms

TOKEN = "tok-0123456789abcdef"
PEM = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----\n"


def _tree(root: Path) -> dict[str, bytes]:
    """Files holding the secrets in several forms and places; what each holds."""
    long_dir = root / ("d" * 120)
    long_dir.mkdir(parents=True)
    big = bytearray(random.Random(7).randbytes(300_000))
    for at in (0, 65_530, 131_071, 299_980):  # at a piece's edge, at the very end
        big[at : at + len(TOKEN)] = TOKEN.encode()
    files = {
        "plain.txt": f"token={TOKEN}\nnothing else\n".encode(),
        f"{long_dir.name}/long-name.txt": f"a {TOKEN} b".encode(),
        "key.pem": f"key:\n{PEM}".encode(),
        "encoded.txt": base64.b64encode(f"xy{TOKEN}".encode()) + b"\n",
        "big.bin": bytes(big),
        "empty": b"",
        "clean.txt": b"no secret here\n",
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    (root / "link").symlink_to("plain.txt")
    return files


def _masked_archive(archive: bytes, piece: int, secrets: list[str]) -> bytes:
    out = io.BytesIO()
    sink = MaskingSink(masked_forms(secrets), out)
    cuts = random.Random(piece)
    at = 0
    while at < len(archive):
        size = cuts.randint(1, piece)
        sink.write(archive[at : at + size])
        at += size
    sink.close()
    return out.getvalue()


@pytest.mark.parametrize("tar_format", ["gnu", "pax"])
@pytest.mark.parametrize("piece", [7, 4096, 1 << 20])
def test_every_form_of_a_secret_is_masked_and_the_rest_unpacks_as_it_was(
    tmp_path: Path, tar_format: str, piece: int
) -> None:
    source, unpacked = tmp_path / "source", tmp_path / "unpacked"
    source.mkdir()
    unpacked.mkdir()
    files = _tree(source)
    archive = subprocess.run(
        ["tar", f"--format={tar_format}", "-czf", "-", "-C", str(source), "."],
        capture_output=True,
        check=True,
    ).stdout
    masked = _masked_archive(archive, piece, [TOKEN, PEM])
    subprocess.run(["tar", "-xzf", "-", "-C", str(unpacked)], input=masked, check=True)
    raw = gzip.decompress(masked)
    assert TOKEN.encode() not in raw
    assert PEM.splitlines()[1].encode() not in raw
    for name, data in files.items():
        got = (unpacked / name).read_bytes()
        assert len(got) == len(data), name
        assert TOKEN.encode() not in got
        if TOKEN.encode() not in data and b"MIIE" not in data and name != "encoded.txt":
            assert got == data, name
    assert (unpacked / "plain.txt").read_bytes() == b"token=" + b"*" * len(
        TOKEN
    ) + b"\nnothing else\n"
    assert (unpacked / "encoded.txt").read_bytes().count(b"*") >= len(TOKEN)
    assert (unpacked / "link").readlink() == Path("plain.txt")


def test_without_secrets_nothing_changes_but_the_compression(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(f"token={TOKEN}\n")
    archive = subprocess.run(
        ["tar", "-czf", "-", "-C", str(tmp_path), "a.txt"], capture_output=True, check=True
    ).stdout
    assert gzip.decompress(_masked_archive(archive, 100, [])) == gzip.decompress(archive)


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(gzip.compress(b"not a tar archive at all" * 40, mtime=0), id="not-tar"),
        pytest.param(gzip.compress(bytes(300), mtime=0), id="cut-in-a-header"),
        pytest.param(gzip.compress(bytes(1024), mtime=0) * 2, id="two-gzip-members"),
    ],
)
def test_a_stream_that_is_not_tar_fails_rather_than_being_stored_unmasked(stream: bytes) -> None:
    with pytest.raises(ValueError, match="tar"):
        _masked_archive(stream, 64, [TOKEN])
