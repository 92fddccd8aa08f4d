"""PNG chunk walking for cards: verify structure and CRCs, read text chunks, strip/insert them.

Must not: decode card JSON or base64 (cards.py does) or touch image pixels (_images.py does).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from evacore.errors import ImportInvalid, TooLarge
from evacore.formats.limits import Limits

SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT_TYPES = (b"tEXt", b"zTXt", b"iTXt")
CARD_KEYWORDS = ("chara", "ccv3")
ASSET_PREFIX = "chara-ext-asset_"
_MAX_CHUNK = 0x7FFFFFFF


@dataclass(frozen=True)
class Chunk:
    """One chunk: its type, payload and byte span [start, end) in the file (length to CRC)."""

    type: bytes
    data: bytes
    start: int
    end: int


@dataclass(frozen=True)
class PngLayout:
    chunks: list[Chunk]
    trailing: int
    """Bytes after IEND (for example an appended ZIP)."""


def walk(data: bytes, limits: Limits) -> PngLayout:
    """Walk every chunk up to IEND, checking lengths against the remaining bytes and CRCs."""
    if not data.startswith(SIGNATURE):
        raise ImportInvalid("not a PNG file: the signature is missing or damaged")
    chunks: list[Chunk] = []
    pos = len(SIGNATURE)
    total = len(data)
    while True:
        if pos + 8 > total:
            raise ImportInvalid(f"PNG is truncated: chunk header at offset {pos} is cut off")
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        name = ctype.decode("latin-1")
        if not ctype.isalpha():
            raise ImportInvalid(f"PNG chunk at offset {pos} has an invalid type {ctype!r}")
        if length > _MAX_CHUNK:
            raise ImportInvalid(f"PNG chunk {name} at offset {pos} declares an invalid length")
        if ctype in TEXT_TYPES and length > limits.max_text_bytes:
            raise TooLarge(
                f"PNG {name} chunk at offset {pos} is {length} bytes; "
                f"the limit is {limits.max_text_bytes}",
                limit=limits.max_text_bytes,
            )
        end = pos + 12 + length
        if end > total:
            raise ImportInvalid(
                f"PNG is truncated: chunk {name} at offset {pos} declares {length} bytes "
                f"but only {max(total - pos - 12, 0)} remain"
            )
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(body, zlib.crc32(ctype)) != crc:
            raise ImportInvalid(f"PNG chunk {name} at offset {pos} has a bad CRC")
        chunks.append(Chunk(ctype, body, pos, end))
        pos = end
        if ctype == b"IEND":
            return PngLayout(chunks, total - pos)


def keyword(chunk: Chunk) -> str | None:
    """The keyword of a text chunk (Latin-1), or None for other chunks / no NUL separator."""
    if chunk.type not in TEXT_TYPES:
        return None
    nul = chunk.data.find(b"\x00", 0, 80)
    if nul < 1:
        return None
    return chunk.data[:nul].decode("latin-1")


def is_card_chunk(chunk: Chunk) -> bool:
    word = keyword(chunk)
    if word is None:
        return False
    lowered = word.lower()
    return lowered in CARD_KEYWORDS or lowered.startswith(ASSET_PREFIX)


def _inflate(data: bytes, cap: int, what: str) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, cap + 1)
    except zlib.error as exc:
        raise ImportInvalid(f"{what} has corrupt compressed data: {exc}") from None
    if len(out) > cap:
        raise TooLarge(f"{what} inflates past {cap} bytes", limit=cap)
    if not inflater.eof:
        raise ImportInvalid(f"{what} has truncated compressed data")
    return out


def text_value(chunk: Chunk, limits: Limits) -> bytes:
    """The text of a tEXt/zTXt/iTXt chunk as raw bytes (inflated when compressed)."""
    word = keyword(chunk) or "?"
    what = f"PNG {chunk.type.decode()} chunk {word!r}"
    rest = chunk.data[len(word.encode("latin-1")) + 1 :]
    if chunk.type == b"tEXt":
        return rest
    if chunk.type == b"zTXt":
        if not rest or rest[0] != 0:
            raise ImportInvalid(f"{what} uses an unknown compression method")
        return _inflate(rest[1:], limits.max_text_bytes, what)
    if len(rest) < 2:
        raise ImportInvalid(f"{what} is truncated")
    flag, method = rest[0], rest[1]
    parts = rest[2:].split(b"\x00", 2)
    if len(parts) != 3:
        raise ImportInvalid(f"{what} is missing its language or translated keyword")
    text = parts[2]
    if flag == 1:
        if method != 0:
            raise ImportInvalid(f"{what} uses an unknown compression method")
        return _inflate(text, limits.max_text_bytes, what)
    return text


def strip_card_chunks(data: bytes, layout: PngLayout) -> bytes:
    """The PNG without any chara/ccv3/chara-ext-asset_* text chunk and without trailing bytes."""
    parts = [SIGNATURE]
    parts += [data[c.start : c.end] for c in layout.chunks if not is_card_chunk(c)]
    return b"".join(parts)


def text_chunk(word: str, text: str) -> bytes:
    """Encode one tEXt chunk (keyword and text must be Latin-1)."""
    body = word.encode("latin-1") + b"\x00" + text.encode("latin-1")
    head = b"tEXt" + body
    return struct.pack(">I", len(body)) + head + struct.pack(">I", zlib.crc32(head))


def insert_before_iend(stripped: bytes, chunks: list[bytes]) -> bytes:
    """Insert encoded chunks right before IEND of a PNG returned by `strip_card_chunks`."""
    return stripped[:-12] + b"".join(chunks) + stripped[-12:]
