"""Builders for synthetic test inputs: PNG chunks, card PNGs, CHARX archives.

Must not: read the shared fixtures (tests do that by path).
"""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib
from typing import Any

from PIL import Image

from tests.helpers import FIXTURES

CARD_FIXTURES = sorted((FIXTURES / "cards").glob("*.png"))
SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(ctype: bytes, body: bytes, crc: int | None = None) -> bytes:
    head = ctype + body
    value = zlib.crc32(head) if crc is None else crc
    return struct.pack(">I", len(body)) + head + struct.pack(">I", value)


def tiny_image() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 6), (10, 20, 30)).save(out, format="PNG")
    return out.getvalue()


def split_png(png: bytes) -> tuple[bytes, bytes]:
    """(everything before IEND, the IEND chunk)."""
    return png[:-12], png[-12:]


def b64json(obj: Any) -> bytes:
    return base64.b64encode(json.dumps(obj).encode("utf-8"))


def png_with(*chunks: bytes, image: bytes | None = None) -> bytes:
    body, iend = split_png(image or tiny_image())
    return body + b"".join(chunks) + iend


def text(keyword: str, value: bytes) -> bytes:
    return chunk(b"tEXt", keyword.encode("latin-1") + b"\x00" + value)


def ztxt(keyword: str, value: bytes) -> bytes:
    return chunk(b"zTXt", keyword.encode("latin-1") + b"\x00\x00" + zlib.compress(value))


def itxt(keyword: str, value: bytes, compressed: bool) -> bytes:
    payload = zlib.compress(value) if compressed else value
    flag = b"\x01\x00" if compressed else b"\x00\x00"
    return chunk(b"iTXt", keyword.encode("latin-1") + b"\x00" + flag + b"en\x00Chara\x00" + payload)


def png_chunk_types(png: bytes) -> list[tuple[str, str | None]]:
    """(type, keyword or None) for each chunk."""
    out: list[tuple[str, str | None]] = []
    pos = 8
    while pos < len(png):
        length, ctype = struct.unpack(">I4s", png[pos : pos + 8])
        body = png[pos + 8 : pos + 8 + length]
        word = body.split(b"\x00", 1)[0].decode("latin-1") if ctype == b"tEXt" else None
        out.append((ctype.decode(), word))
        pos += 12 + length
    return out


def png_text(png: bytes, keyword: str) -> dict[str, Any]:
    pos = 8
    while pos < len(png):
        length, ctype = struct.unpack(">I4s", png[pos : pos + 8])
        body = png[pos + 8 : pos + 8 + length]
        if ctype == b"tEXt" and body.startswith(keyword.encode() + b"\x00"):
            return json.loads(base64.b64decode(body[len(keyword) + 1 :]))
        pos += 12 + length
    raise KeyError(keyword)


def v3_card(**data: Any) -> dict[str, Any]:
    base = {"name": "Test", "description": "d", "first_mes": "hi"}
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": {**base, **data}}


def charx(files: dict[str, bytes], prefix: bytes = b"") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, payload in files.items():
            archive.writestr(name, payload)
    return prefix + out.getvalue()


def solid_webp(width: int, height: int, colour: tuple[int, int, int] = (40, 90, 160)) -> bytes:
    """A real, decodable lossless WebP of any size up to 16384², a few dozen bytes long.

    Pillow encodes a small solid-colour image; a solid colour costs no bits per pixel in
    VP8L, so rewriting the header's 14-bit width and height gives the same picture at the
    new size without encoding (and holding) all its pixels here.
    """
    out = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(out, format="WEBP", lossless=True, quality=0, method=0)
    data = out.getvalue()
    assert data[12:16] == b"VP8L" and data[20] == 0x2F, "Pillow did not write a VP8L image"
    bits = int.from_bytes(data[21:25], "little")
    bits = (bits & ~((1 << 28) - 1)) | (width - 1) | ((height - 1) << 14)
    return data[:21] + bits.to_bytes(4, "little") + data[25:]


def charx_with_icon(icon: bytes, ext: str = "webp", name: str = "Big Icon") -> bytes:
    """A CHARX archive whose main icon is `icon` (stored at assets/icon/images/main.<ext>)."""
    card = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {
        "name": name, "description": "", "first_mes": "Hi.",
        "assets": [{"type": "icon", "uri": f"embeded://assets/icon/images/main.{ext}",
                    "name": "main", "ext": ext}]}}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("card.json", json.dumps(card))
        z.writestr(f"assets/icon/images/main.{ext}", icon)
    return out.getvalue()
