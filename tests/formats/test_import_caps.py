"""R8.2: imports are capped as they are read, not after a full parse: image sizes come from
headers (nothing is decoded past the pixel limit, on import or on a PNG export), lorebook
entries are counted before the file is parsed, chat lines before they are decoded, and a
message or swipe longer than the API's 1M-character cap is refused on import too."""

from __future__ import annotations

import base64
import io
import json
import struct
import time
import zlib

import pytest
from PIL import Image

from evacore.errors import ImportInvalid, InvalidInput, TooLarge
from evacore.formats.cards import Card, CardAsset, read_card, write_charx, write_png
from evacore.formats.limits import DEFAULT_LIMITS, MAX_MESSAGE_CHARS, Limits
from evacore.formats.st_chat import read_st_chat
from evacore.formats.worldinfo import load_world_info_file, read_world_info
from tests.formats._build import b64json, charx_with_icon, png_with, solid_webp, text, v3_card

CAP = DEFAULT_LIMITS.max_image_pixels


# -- images -----------------------------------------------------------------------------------

def test_r8_2_solid_webp_builder_makes_the_size_it_says() -> None:
    with Image.open(io.BytesIO(solid_webp(300, 200))) as img:
        assert img.size == (300, 200)
        img.load()
        assert img.getpixel((299, 199)) == (40, 90, 160)


@pytest.mark.parametrize("side", [4097, 12000, 16383])
def test_r8_2_charx_icon_past_the_pixel_limit_is_refused(side: int) -> None:
    started = time.monotonic()
    with pytest.raises(TooLarge) as caught:
        read_card(charx_with_icon(solid_webp(side, side)), "big.charx")
    assert str(side * side) in caught.value.message and str(CAP) in caught.value.message
    assert caught.value.details["limit"] == CAP
    assert time.monotonic() - started < 1  # read from the header, never decoded


def test_r8_2_icon_at_the_limit_is_accepted() -> None:
    card = read_card(charx_with_icon(solid_webp(4096, 4096)), "ok.charx")
    assert card.image is not None


def _huge_ihdr_png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(out, format="PNG")
    png = bytearray(out.getvalue())
    png[16:24] = struct.pack(">II", width, height)
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(png[12:29])))
    return bytes(png)


def test_r8_2_png_card_image_past_the_limit_is_refused() -> None:
    card = png_with(text("chara", b64json(v3_card())), image=_huge_ihdr_png(20000, 20000))
    with pytest.raises(TooLarge, match="400000000 pixels"):
        read_card(card, "huge.png")


def test_r8_2_data_uri_asset_past_the_limit_is_refused_by_name() -> None:
    uri = "data:image/webp;base64," + base64.b64encode(solid_webp(9000, 9000)).decode()
    body = v3_card(assets=[{"type": "emotion", "uri": uri, "name": "smile", "ext": "webp"}])
    with pytest.raises(TooLarge, match="emotion 'smile'"):
        read_card(json.dumps(body).encode(), "card.json")


def test_r8_2_assets_that_are_not_images_pass() -> None:
    uri = "data:audio/mpeg;base64," + base64.b64encode(b"ID3" + b"\0" * 500).decode()
    body = v3_card(assets=[{"type": "sound", "uri": uri, "name": "hello", "ext": "mp3"}])
    card = read_card(json.dumps(body).encode(), "card.json")
    assert [a.name for a in card.assets] == ["hello"]


def _stored(icon: bytes) -> Card:
    return Card(spec="chara_card_v3", data={"name": "Stored", "first_mes": "Hi."},
                extra_top={}, image=icon, assets=[CardAsset("main", "icon", "webp",
                                                            "ccdefault:", icon)])


@pytest.mark.parametrize("side", [12000, 16383])
def test_r8_2_png_export_of_a_huge_icon_is_a_clear_4xx(side: int) -> None:
    """12000² took 2.9 GB and 10 s to convert; 16383² was a DecompressionBombError (500)."""
    started = time.monotonic()
    with pytest.raises(InvalidInput) as caught:
        write_png(_stored(solid_webp(side, side)))
    assert caught.value.status == 422
    assert str(side * side) in caught.value.message and "CHARX" in caught.value.message
    assert time.monotonic() - started < 1
    assert write_charx(_stored(solid_webp(side, side)))  # that export keeps it as it is


def test_r8_2_png_export_still_converts_a_normal_webp() -> None:
    png = write_png(_stored(solid_webp(640, 960)))
    with Image.open(io.BytesIO(png)) as img:
        assert img.format == "PNG" and img.size == (640, 960)


def test_r8_2_png_export_of_an_unreadable_image_is_a_4xx() -> None:
    with pytest.raises(InvalidInput, match="cannot be converted"):
        write_png(_stored(b"RIFF\x10\0\0\0WEBPVP8 garbage"))


# -- lorebooks ------------------------------------------------------------------------------

SMALL = Limits(max_lore_entries=10)


def _st_book(n: int) -> bytes:
    return json.dumps({"entries": {str(i): {"uid": i, "key": [f"k{i}"], "content": "c"}
                                   for i in range(n)}}).encode()


def _v3_book(n: int) -> bytes:
    return json.dumps({"spec": "lorebook_v3", "data": {"entries": [
        {"keys": [f"k{i}"], "content": "c"} for i in range(n)]}}).encode()


@pytest.mark.parametrize("build", [_st_book, _v3_book], ids=["world_info", "lorebook_v3"])
def test_r2_4_lorebook_entries_counted_before_parsing(build) -> None:
    assert len(read_world_info(load_world_info_file(build(10), SMALL)).entries) == 10
    with pytest.raises(TooLarge, match="more than 10 entries") as caught:
        load_world_info_file(build(11), SMALL)
    assert caught.value.details["limit"] == 10


def test_r2_4_strings_that_look_like_entries_are_not_counted() -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["a"], "content": "{}" * 50 + "[{}]" * 50}}}
    assert load_world_info_file(json.dumps(book).encode(), SMALL)["entries"]


def test_r2_4_card_book_past_the_entry_cap_is_refused() -> None:
    entries = [{"keys": [f"k{i}"], "content": "c"} for i in range(11)]
    body = v3_card(character_book={"entries": entries})
    with pytest.raises(TooLarge, match="more than 10 entries"):
        read_card(json.dumps(body).encode(), "card.json", SMALL)


def test_r2_4_lorebook_that_is_not_json_is_still_an_import_error() -> None:
    with pytest.raises(ImportInvalid, match="not valid JSON"):
        load_world_info_file(b'{"entries": {', SMALL)


# -- chats ------------------------------------------------------------------------------------

HEADER = json.dumps({"user_name": "U", "character_name": "C"})


def _chat(*lines: str) -> bytes:
    return "\n".join((HEADER, *lines)).encode()


def test_r8_2_chat_lines_counted_before_parsing() -> None:
    limits = Limits(max_chat_messages=5)
    line = '{"name":"U","is_user":true,"mes":"hi"}'
    assert len(read_st_chat(_chat(*[line] * 5), limits).messages) == 5
    assert len(read_st_chat(_chat(*[line] * 5) + b"\n", limits).messages) == 5
    with pytest.raises(TooLarge, match="more than 5 messages"):
        read_st_chat(_chat(*[line] * 6), limits)


def test_r8_2_message_past_the_api_cap_is_refused_on_import() -> None:
    ok = json.dumps({"name": "U", "is_user": True, "mes": "x" * MAX_MESSAGE_CHARS})
    assert read_st_chat(_chat(ok)).messages[0].content == "x" * MAX_MESSAGE_CHARS
    long = json.dumps({"name": "U", "is_user": True, "mes": "x" * (MAX_MESSAGE_CHARS + 1)})
    with pytest.raises(TooLarge, match="line 2: the message is 1000001 characters"):
        read_st_chat(_chat(long))


def test_r8_2_swipe_past_the_cap_is_refused_on_import() -> None:
    line = json.dumps({"name": "C", "is_user": False, "mes": "a", "swipe_id": 0,
                       "swipes": ["a", "b" * 11]})
    with pytest.raises(TooLarge, match="line 2: swipe 2 is 11 characters"):
        read_st_chat(_chat(line), Limits(max_message_chars=10))


def test_r8_2_line_past_the_text_cap_is_refused_undecoded() -> None:
    line = '{"name":"U","is_user":true,"mes":"' + "\xff" * 200 + '"}'
    data = HEADER.encode() + b"\n" + line.encode("latin-1")  # not UTF-8, and too long
    with pytest.raises(TooLarge, match="chat line 2 is"):
        read_st_chat(data, Limits(max_text_bytes=100))
