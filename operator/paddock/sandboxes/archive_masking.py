"""An archive's secrets masked on their way to the object store: the gzipped ``tar`` the
sandbox's pod streams out goes on to the bucket gzipped again, every form of a secret value the
run log masks (``scrubbing.variants``) overwritten in the regular files' contents with as many
``*``, so that sizes, and so the archive's layout, stay as they were. Pure.

Only what a tar member holds is masked, never a header (a name or a number there could match a
short value, and the archive would no longer unpack): a secret value as a file's name stays, and
so does the contents of a sparse member (GNU's ``S``, which the archive's ``tar`` does not make
without ``--sparse``). A stream this cannot read as tar raises ``ValueError``: the archive fails
rather than being stored unmasked."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from paddock.kube.exec import Sink
from paddock.runs.scrubbing import variants

BLOCK = 512
REGULAR = frozenset({b"0", b"\0", b"7"})  # a file's contents follow (7: contiguous)
PAX = frozenset({b"x"})  # a pax header for the next member: its size may be there
GZIP = 16 + zlib.MAX_WBITS


def masked_forms(secrets: Iterable[str]) -> list[bytes]:
    """Every form of the values that is masked, as bytes, longest first."""
    found = {form.encode() for secret in secrets for form in variants(secret)}
    return sorted(found, key=len, reverse=True)


class MaskingSink:
    """A ``Sink`` that takes the pod's gzipped tar and writes it, masked and gzipped, on to
    ``sink``; ``close`` writes the end."""

    def __init__(self, forms: list[bytes], sink: Sink) -> None:
        self._forms, self._sink = forms, sink
        self._keep = max((len(form) for form in forms), default=1) - 1
        self._inflate = zlib.decompressobj(GZIP)
        self._deflate = zlib.compressobj(6, zlib.DEFLATED, GZIP)
        self._header = bytearray()  # a header not yet whole
        self._left = 0  # bytes of the member's blocks still to come (contents and padding)
        self._contents = 0  # of them, the contents
        self._masking = False  # the member's contents are masked
        self._held = b""  # masked contents held back: a value could straddle the next piece
        self._reading_pax = False  # the member is a pax header, whose records are kept
        self._pax = bytearray()
        self._pax_size: int | None = None  # the size the last pax header gave the next member
        self._ended = False  # past the end-of-archive block: the rest passes as it is

    def write(self, data: bytes, /) -> int:
        self._tar(self._inflate.decompress(data))
        if self._inflate.unused_data:  # a second gzip member: not what tar -czf makes
            raise ValueError("the archive is more than one gzip stream, not a tar Paddock made")
        return len(data)

    def close(self) -> None:
        self._tar(self._inflate.flush())
        if not self._inflate.eof or self._header or self._left:
            raise ValueError("the archive ended in the middle of a tar member")
        self._out(b"", end=True)

    def _out(self, data: bytes, end: bool = False) -> None:
        packed = self._deflate.compress(data) + (self._deflate.flush() if end else b"")
        if packed:
            self._sink.write(packed)

    def _tar(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._ended:
                self._out(bytes(view))
                return
            if self._left == 0:
                taken = BLOCK - len(self._header)
                self._header += view[:taken]
                view = view[taken:]
                if len(self._header) == BLOCK:
                    self._member(bytes(self._header))
                    self._header.clear()
                continue
            piece, view = view[: self._left], view[self._left :]
            self._left -= len(piece)
            self._blocks(bytes(piece))

    def _member(self, header: bytes) -> None:
        """A header block: pass it, and know what follows it."""
        self._out(header)
        if header == bytes(BLOCK):
            self._ended = True
            return
        _checked(header)
        kind = header[156:157]
        size = _number(header[124:136])
        if self._pax_size is not None and kind not in PAX:
            size, self._pax_size = self._pax_size, None
        self._contents = size
        self._left = -(-size // BLOCK) * BLOCK
        self._masking = kind in REGULAR and bool(self._forms)
        self._reading_pax = kind in PAX
        self._pax.clear()

    def _blocks(self, piece: bytes) -> None:
        """Blocks of the member: its contents (masked, or read when a pax header), then the
        padding."""
        contents, padding = piece[: self._contents], piece[self._contents :]
        self._contents -= len(contents)
        if self._masking:
            text = self._masked(self._held + contents)
            keep = min(self._keep, len(text)) if self._contents else 0
            self._held = text[len(text) - keep :]
            self._out(text[: len(text) - keep])
        else:
            self._out(contents)
            if self._reading_pax:
                self._pax += contents
        if self._contents == 0 and self._reading_pax:
            self._pax_size, self._reading_pax = _pax_size(bytes(self._pax)), False
        self._out(padding)

    def _masked(self, text: bytes) -> bytes:
        for form in self._forms:
            if form in text:
                text = text.replace(form, b"*" * len(form))
        return text


def _checked(header: bytes) -> None:
    """A header whose checksum is its own, or ``ValueError``."""
    try:
        stored = int(header[148:156].replace(b"\0", b" ").strip() or b"-1", 8)
    except ValueError:
        stored = -1
    if stored != sum(header[:148]) + 8 * 32 + sum(header[156:]):
        raise ValueError("the archive is not a tar stream Paddock can read to mask it")


def _number(field: bytes) -> int:
    """A header's number: octal text, or base-256 (GNU's, for large sizes)."""
    if field[0] & 0x80:
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    text = field.replace(b"\0", b" ").strip()
    return int(text, 8) if text else 0


def _pax_size(records: bytes) -> int | None:
    """The ``size`` a pax header's records give (``LEN size=N\\n``), if any."""
    size = None
    while records:
        length_text, _, rest = records.partition(b" ")
        length = int(length_text)
        key, _, value = rest[: length - len(length_text) - 2].partition(b"=")
        if key == b"size":
            size = int(value)
        records = records[length:]
    return size
