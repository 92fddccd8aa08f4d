"""Malformed card files raise typed errors that name the problem."""

from __future__ import annotations

import io
import json
import random
import struct
import zipfile
from collections.abc import Callable

import pytest

from evacore.errors import EvacoreError, ImportInvalid, TooLarge, UnsupportedMedia
from evacore.formats.cards import read_card
from evacore.formats.limits import Limits
from tests.formats._build import (
    FIXTURES,
    b64json,
    charx,
    chunk,
    png_with,
    text,
    tiny_image,
    v3_card,
    ztxt,
)

SMALL = Limits(max_text_bytes=4096, max_zip_entries=5, max_zip_total_bytes=100_000,
               max_json_depth=20, max_input_bytes=2_000_000)
CARD_JSON = json.dumps(v3_card()).encode()


def _seraphina() -> bytes:
    return (FIXTURES / "cards" / "st_default_Seraphina.v2.png").read_bytes()


def _bad_crc() -> bytes:
    body = b"ccv3\x00" + b64json(v3_card())
    return png_with(chunk(b"tEXt", body, crc=0xDEADBEEF))


def _lying_zip() -> bytes:
    """card.json really holds 60 kB but both headers declare 100 bytes."""
    big = json.dumps(v3_card(description="x" * 60_000)).encode()
    data = bytearray(charx({"card.json": big}))
    local = data.find(b"PK\x03\x04")
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, 100)
    struct.pack_into("<I", data, central + 24, 100)
    return bytes(data)


def _encrypted_zip() -> bytes:
    data = bytearray(charx({"card.json": CARD_JSON}))
    central = data.find(b"PK\x01\x02")
    data[central + 8] |= 1
    local = data.find(b"PK\x03\x04")
    data[local + 6] |= 1
    return bytes(data)


def _zip_bomb() -> bytes:
    return charx({"card.json": CARD_JSON, "assets/other/other/pad.bin": b"\x00" * 200_000})


def _escaping_zip(name: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("card.json", CARD_JSON)
        archive.writestr(zipfile.ZipInfo(name), b"evil")
    return out.getvalue()


CASES: list[tuple[str, Callable[[], bytes], type[Exception], str]] = [
    ("empty file", lambda: b"", ImportInvalid, "empty"),
    ("gif", lambda: b"GIF89a\x01\x00", UnsupportedMedia, "unrecognised"),
    ("webp", lambda: b"RIFF\x00\x00\x00\x00WEBPVP8 ", UnsupportedMedia, "WEBP"),
    ("damaged signature", lambda: b"\x89PNG\r\n\x1a\x0b" + b"\x00" * 20, UnsupportedMedia,
     "unrecognised"),
    ("truncated png", lambda: _seraphina()[:300_000], ImportInvalid, "truncated"),
    ("png cut before IEND", lambda: png_with(text("ccv3", b64json(v3_card())))[:-12],
     ImportInvalid, "truncated"),
    ("bad crc", _bad_crc, ImportInvalid, "bad CRC"),
    ("png without card chunk", tiny_image, ImportInvalid, "no character card text chunk"),
    ("png with unrelated text", lambda: png_with(text("Comment", b"hello")), ImportInvalid,
     "no character card"),
    ("invalid base64", lambda: png_with(text("chara", b"not*base64!")), ImportInvalid,
     "not valid base64"),
    ("base64 of non-UTF-8 JSON", lambda: png_with(text(
        "chara", __import__("base64").b64encode('{"name": "Caf\xe9"}'.encode("latin-1")))),
     ImportInvalid, "not valid UTF-8"),
    ("base64 of non-JSON", lambda: png_with(text(
        "chara", __import__("base64").b64encode(b"hello there"))), ImportInvalid,
     "not valid JSON"),
    ("non-UTF-8 JSON file", lambda: '{"name": "Caf\xe9"}'.encode("latin-1"), ImportInvalid,
     "not valid UTF-8"),
    ("UTF-16 JSON file", lambda: '{"name": "x"}'.encode("utf-16"), UnsupportedMedia,
     "unrecognised"),
    ("JSON array", lambda: b"[1, 2]", ImportInvalid, "must be a JSON object"),
    ("JSON not a card", lambda: b'{"hello": "world"}', ImportInvalid, "not a character card"),
    ("World Info JSON", lambda: b'{"entries": {}}', ImportInvalid, "lorebook"),
    ("lorebook_v3 spec", lambda: b'{"spec": "lorebook_v3", "data": {}}', ImportInvalid,
     "unsupported card spec"),
    ("V2 without data", lambda: b'{"spec": "chara_card_v2"}', ImportInvalid,
     "needs a 'data' object"),
    ("field of the wrong type", lambda: json.dumps(v3_card(description={"a": 1})).encode(),
     ImportInvalid, "'description' must be a string"),
    ("extensions not an object", lambda: json.dumps(v3_card(extensions=[1])).encode(),
     ImportInvalid, "'extensions' must be an object"),
    ("NaN in JSON", lambda: b'{"name": NaN}', ImportInvalid, "not valid JSON"),
    ("JSON nested too deep", lambda: b'{"name": "x", "a": ' + b"[" * 50 + b"]" * 50 + b"}",
     ImportInvalid, "deeper than 20"),
    ("deep JSON in a PNG chunk", lambda: png_with(text(
        "ccv3", __import__("base64").b64encode(b"[" * 30 + b"]" * 30))), ImportInvalid,
     "deeper than 20"),
    ("text chunk over the limit", lambda: png_with(text("ccv3", b"A" * 5000)), TooLarge,
     "limit is 4096"),
    ("zTXt inflating past the limit", lambda: png_with(ztxt("ccv3", b"A" * 50_000)), TooLarge,
     "inflates past"),
    ("input over the limit", lambda: b"{" + b" " * 2_000_001 + b"}", TooLarge, "limit is"),
    ("JSON card over the text limit", lambda: json.dumps(v3_card(description="y" * 5000))
     .encode(), TooLarge, "limit is 4096"),
    ("zip bomb by declared size", _zip_bomb, TooLarge, "uncompressed bytes"),
    ("zip lying about sizes", _lying_zip, ImportInvalid, "cannot be read"),
    ("too many zip entries", lambda: charx({f"f{i}": b"" for i in range(6)}), TooLarge,
     "entries"),
    ("zip entry with ../", lambda: _escaping_zip("../evil.txt"), ImportInvalid, "escapes"),
    ("zip entry nested ../", lambda: _escaping_zip("assets/../../evil"), ImportInvalid,
     "escapes"),
    ("absolute zip entry", lambda: _escaping_zip("/etc/passwd"), ImportInvalid, "escapes"),
    ("windows drive zip entry", lambda: _escaping_zip("C:\\evil"), ImportInvalid, "escapes"),
    ("encrypted zip entry", _encrypted_zip, ImportInvalid, "encrypted"),
    ("zip without card.json", lambda: charx({"other.json": CARD_JSON}), ImportInvalid,
     "no card.json"),
    ("zip magic then garbage", lambda: b"PK\x03\x04" + b"\x00" * 64, ImportInvalid,
     "not a readable ZIP"),
    ("card.json not a card", lambda: charx({"card.json": b"[]"}), ImportInvalid,
     "must be a JSON object"),
]


@pytest.mark.parametrize(("label", "build", "error", "needle"), CASES, ids=[c[0] for c in CASES])
def test_r8_2_malformed_card_raises_a_typed_error(label, build, error, needle) -> None:
    with pytest.raises(error) as caught:
        read_card(build(), filename="upload.bin", limits=SMALL)
    assert type(caught.value) is error
    assert needle in caught.value.message
    assert caught.value.details.get("filename") == "upload.bin"


def test_r8_2_default_limits_reject_a_huge_text_chunk_before_reading_it() -> None:
    declared = struct.pack(">I", 20 * 1024 * 1024) + b"tEXt" + b"ccv3\x00"
    body, iend = tiny_image()[:-12], tiny_image()[-12:]
    with pytest.raises(TooLarge):
        read_card(body + declared + iend)


def test_r8_2_error_codes_map_to_http_statuses() -> None:
    with pytest.raises(ImportInvalid) as invalid:
        read_card(b"[]")
    with pytest.raises(UnsupportedMedia) as unsupported:
        read_card(b"BM\x00\x00")
    assert (invalid.value.code, invalid.value.status) == ("import_invalid", 422)
    assert (unsupported.value.code, unsupported.value.status) == ("unsupported_media", 415)


def _mutate(seed: bytes, rng: random.Random) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(data))
        roll = rng.random()
        if roll < 0.5:
            data[pos] = rng.randrange(256)
        elif roll < 0.75:
            del data[pos : pos + rng.randint(1, 50)]
        else:
            data[pos:pos] = rng.randbytes(rng.randint(1, 10))
    return bytes(data)


def test_r8_2_mutated_files_raise_only_typed_errors() -> None:
    """Random byte damage to PNG, zTXt, CHARX and JSON cards never escapes as a crash."""
    seeds = [
        png_with(text("ccv3", b64json(v3_card(character_book={"entries": []})))),
        png_with(ztxt("chara", b64json(v3_card()))),
        charx({"card.json": CARD_JSON, "assets/icon/images/main.png": tiny_image()}),
        CARD_JSON,
    ]
    rng = random.Random(20240928)
    for _ in range(1500):
        try:
            read_card(_mutate(rng.choice(seeds), rng), limits=SMALL)
        except EvacoreError:
            pass


def test_r8_2_extreme_nesting_is_refused_without_recursing() -> None:
    for payload in (b"[" * 200_000, b'{"name": "x", "a": ' + b'{"b": ' * 100_000):
        with pytest.raises(ImportInvalid) as caught:
            read_card(payload)
        assert "deeper than 64" in caught.value.message
