"""Character cards: every fixture reads, and PNG/JSON/CHARX exports re-read to an equal card."""

from __future__ import annotations

import base64
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from evacore.formats.cards import (
    Card,
    CardAsset,
    detect_card_kind,
    parse_card_object,
    read_card,
    write_charx,
    write_json,
    write_png,
)
from tests.formats._build import (
    CARD_FIXTURES,
    FIXTURES,
    b64json,
    charx,
    chunk,
    itxt,
    png_chunk_types,
    png_text,
    png_with,
    text,
    tiny_image,
    v3_card,
    ztxt,
)

WRITERS = (write_png, write_json, write_charx)


def fixture(name: str) -> bytes:
    return (FIXTURES / "cards" / name).read_bytes()


@pytest.mark.parametrize("path", CARD_FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.__name__)
def test_r2_3_fixture_cards_survive_export_and_reimport(path, writer) -> None:
    card = read_card(path.read_bytes(), filename=path.name)
    again = read_card(writer(card))
    assert again == card
    assert again.data == card.data and again.extra_top == card.extra_top
    if writer is not write_json:
        assert again.image == card.image


@pytest.mark.parametrize("path", CARD_FIXTURES, ids=lambda p: p.name)
def test_r2_3_png_export_opens_and_carries_both_chunks(path) -> None:
    card = read_card(path.read_bytes())
    out = write_png(card)
    Image.open(io.BytesIO(out)).verify()
    words = [word for kind, word in png_chunk_types(out) if kind == "tEXt"]
    assert words.count("chara") == 1 and words.count("ccv3") == 1
    v2, v3 = png_text(out, "chara"), png_text(out, "ccv3")
    assert (v2["spec"], v2["spec_version"]) == ("chara_card_v2", "2.0")
    assert (v3["spec"], v3["spec_version"]) == ("chara_card_v3", "3.0")
    assert v3["data"]["description"] == card.data["description"] == v3["description"]
    assert "group_only_greetings" not in v2["data"] and v2["data"]["name"] == card.name


def test_r2_3_v1_card_maps_into_v3_data_and_keeps_legacy_keys() -> None:
    card = read_card(fixture("tavernai_Aqua.v1.png"))
    assert card.spec == "v1" and card.name == "Aqua"
    assert "\r\n" in card.data["mes_example"]
    assert card.extra_top == {"avatar": "none", "chat": "1673181146000",
                              "create_date": "1674407315376"}
    assert card.data["alternate_greetings"] == [] and card.data["group_only_greetings"] == []
    assert card.data["creator_notes"] == "" and card.data["extensions"] == {}
    exported = json.loads(write_json(card))
    assert exported["create_date"] == "1674407315376" and exported["name"] == "Aqua"


def test_r2_3_png_with_both_chunks_prefers_ccv3() -> None:
    card = read_card(fixture("st_content_Amy.chara-and-ccv3.png"))
    assert card.spec == "v3"
    assert card.data["extensions"]["group_greetings"]
    assert card.data["creator"] == "Wolfram Ravenwolf" and card.extra_top["creator"] == ""
    assert card.extra_top["talkativeness"] == "1"
    chara = {"spec": "chara_card_v2", "spec_version": "2.0",
             "data": {"name": "Old", "description": "stale"}}
    both = png_with(text("chara", b64json(chara)), text("ccv3", b64json(v3_card(name="New"))))
    assert read_card(both).name == "New"


def test_r2_3_unreadable_ccv3_falls_back_to_chara_with_warning() -> None:
    png = png_with(text("ccv3", b"@@@@"), text("chara", b64json(v3_card(name="Backup"))))
    card = read_card(png)
    assert card.name == "Backup" and any("ccv3" in w for w in card.warnings)


def test_r2_3_v2_fixture_keeps_st_extras_and_raw_book() -> None:
    raw = png_text(fixture("st_default_Seraphina.v2.png"), "chara")
    card = read_card(fixture("st_default_Seraphina.v2.png"))
    assert card.spec == "v2" and card.extra_top["talkativeness"] == "0.5"
    assert card.extra_top["creatorcomment"].startswith("ST Default Bot")
    assert card.data["character_book"] == raw["data"]["character_book"]
    assert "extensions" not in card.data["character_book"]
    assert card.data["group_only_greetings"] == []


def test_r2_3_pure_v2_envelope_and_chunk_before_idat() -> None:
    data = fixture("st_content_CapoGPT.v2-text-before-idat.png")
    card = read_card(data)
    assert card.extra_top == {}
    assert card.data["extensions"]["depth_prompt"] == {"prompt": "", "depth": 4}
    kinds = [kind for kind, _ in png_chunk_types(write_png(card))]
    assert kinds.count("IDAT") == 77 and kinds.index("sRGB") < kinds.index("IDAT")
    assert kinds[-3:] == ["tEXt", "tEXt", "IEND"]


def test_r2_3_other_png_chunks_survive_export() -> None:
    for name, kind in (("st_content_Sakana.v2-characterbook.png", "eXIf"),
                       ("tavernai_Aqua.v1.png", "pHYs")):
        kinds = [k for k, _ in png_chunk_types(write_png(read_card(fixture(name))))]
        assert kind in kinds


def test_r2_3_v3_without_group_greetings_and_assets_gets_defaults() -> None:
    card = read_card(fixture("choral_Default-chan.ccv3-only.png"))
    assert card.data["group_only_greetings"] == []
    assert [(a.type, a.name, a.uri) for a in card.assets] == [("icon", "main", "ccdefault:")]
    assert card.assets[0].data == card.image
    assert "assets" not in png_text(write_png(card), "ccv3")["data"]


def test_r2_3_writing_twice_leaves_one_pair_of_card_chunks() -> None:
    card = read_card(fixture("st_content_Amy.chara-and-ccv3.png"))
    out = write_png(read_card(write_png(card)), image=write_png(card))
    words = [w for kind, w in png_chunk_types(out) if kind == "tEXt"]
    assert words == ["chara", "ccv3"]


def test_r2_3_v2_backfill_strips_lorebook_decorators_but_v3_keeps_them() -> None:
    book = {"extensions": {}, "entries": [{"keys": ["a"], "content": "@@depth 2\n@@@role x\nText",
                                           "extensions": {}, "enabled": True,
                                           "insertion_order": 1, "use_regex": False}]}
    out = write_png(parse_card_object(v3_card(character_book=book, nickname="Nick")))
    assert png_text(out, "chara")["data"]["character_book"]["entries"][0]["content"] == "Text"
    v3 = png_text(out, "ccv3")["data"]
    assert v3["character_book"] == book and v3["nickname"] == "Nick"


@pytest.mark.parametrize("encoding", ["ztxt", "itxt-deflated", "itxt-plain"])
def test_r2_3_compressed_and_international_text_chunks_are_read(encoding) -> None:
    payload = b64json(v3_card(name="Zed"))
    built = {"ztxt": ztxt("ccv3", payload), "itxt-deflated": itxt("ccv3", payload, True),
             "itxt-plain": itxt("ccv3", payload, False)}[encoding]
    assert read_card(png_with(built)).name == "Zed"


def test_r2_3_keyword_case_raw_json_and_lenient_base64_forms() -> None:
    raw = json.dumps({"name": "Raw", "description": "x"}).encode()
    assert read_card(png_with(text("CHARA", raw))).name == "Raw"
    urlsafe = base64.urlsafe_b64encode(json.dumps(v3_card(name="\u00ff\u00fe?>")).encode())
    assert read_card(png_with(text("ccv3", urlsafe.rstrip(b"=")))).name == "\u00ff\u00fe?>"
    wrapped = b"\n".join(b64json(v3_card(name="Wrapped"))[i:i + 60] for i in range(0, 400, 60))
    assert read_card(png_with(text("chara", wrapped))).name == "Wrapped"


def test_r2_3_apng_animation_chunks_are_kept() -> None:
    actl = chunk(b"acTL", b"\x00\x00\x00\x01\x00\x00\x00\x00")
    image = tiny_image()
    apng = image[:33] + actl + image[33:]
    out = write_png(parse_card_object(v3_card()), image=apng)
    assert ("acTL", None) in png_chunk_types(out)
    assert read_card(out).image == apng


def test_r2_3_png_asset_chunks_resolve_asset_uris() -> None:
    card = v3_card(assets=[{"type": "emotion", "uri": "__asset:0", "name": "joy", "ext": "png"}])
    png = png_with(text("chara-ext-asset_:0", base64.b64encode(b"JOYBYTES")),
                   text("ccv3", b64json(card)))
    read = read_card(png)
    assert read.assets[0].data == b"JOYBYTES"
    out = write_png(read)
    assert ("chara-ext-asset_:0") not in [w for _, w in png_chunk_types(out)]
    assert read_card(out).assets[0].data == b"JOYBYTES"


def _charx_files(main: bytes) -> dict[str, bytes]:
    assets = [
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main",
         "ext": "png"},
        {"type": "emotion", "uri": "embedded://assets/emotion/images/happy.webp", "name": "happy",
         "ext": "webp", "x_note": "kept"},
        {"type": "background", "uri": "https://example.invalid/bg.png", "name": "bg", "ext": "png"},
    ]
    return {"card.json": json.dumps(v3_card(name="Zip", assets=assets)).encode(),
            "assets/icon/images/main.png": main,
            "assets/emotion/images/happy.webp": b"RIFF0000WEBPhappy",
            "x_meta/1.json": b'{"type":"png"}'}


def test_r2_3_charx_reads_assets_and_exports_them_again() -> None:
    main = tiny_image()
    card = read_card(charx(_charx_files(main)))
    assert card.name == "Zip" and card.image == main
    by_name = {a.name: a for a in card.assets}
    assert by_name["happy"].data == b"RIFF0000WEBPhappy" and by_name["happy"].extra == {
        "x_note": "kept"}
    assert by_name["bg"].data is None
    assert card.extra_files == {"x_meta/1.json": b'{"type":"png"}'}
    again = read_card(write_charx(card))
    assert again == card and again.image == main and again.extra_files == card.extra_files
    assert [(a.name, a.data) for a in again.assets] == [(a.name, a.data) for a in card.assets]
    assert {a.uri for a in again.assets if a.data} == {
        "embeded://assets/icon/images/main.png", "embeded://assets/emotion/images/happy.webp"}
    png = read_card(write_png(card))
    assert png == card and png.image == main
    assert {a.name: a.data for a in png.assets}["happy"] == b"RIFF0000WEBPhappy"


def test_r2_3_charx_after_a_jpeg_is_detected_and_read() -> None:
    data = charx({"card.json": json.dumps(v3_card(name="Risu")).encode()},
                 prefix=b"\xff\xd8\xff\xe0fakejpeg")
    assert detect_card_kind(data) == "charx" and read_card(data).name == "Risu"


def test_r2_3_png_card_exports_to_charx_with_its_image_embedded() -> None:
    card = read_card(fixture("choral_Default-chan.ccv3-only.png"))
    again = read_card(write_charx(card))
    assert again.image == card.image
    assert again.assets[0].uri == "embeded://assets/icon/images/main.png"


def test_r2_3_json_v1_and_pygmalion_mapping() -> None:
    v1 = {"name": "Old", "description": "d", "personality": None, "tags": "a, b,,c",
          "talkativeness": "0.7", "fav": "true", "creatorcomment": "Creator's notes go here.",
          "avatar": "none"}
    card = read_card(json.dumps(v1).encode())
    assert card.spec == "v1" and card.data["personality"] == ""
    assert card.data["tags"] == ["a", "b", "c"] and card.data["creator_notes"] == ""
    assert card.data["extensions"] == {"talkativeness": "0.7", "fav": "true"}
    assert card.extra_top["tags"] == "a, b,,c" and card.extra_top["avatar"] == "none"
    assert read_card(write_json(card)) == card
    pyg = {"char_name": "Pyg", "char_persona": "persona", "char_greeting": "hello",
           "world_scenario": "world", "example_dialogue": "ex", "extra": 1}
    card = read_card(json.dumps(pyg).encode())
    assert (card.name, card.data["description"], card.data["first_mes"],
            card.data["scenario"], card.data["mes_example"]) == (
        "Pyg", "persona", "hello", "world", "ex")
    assert card.extra_top == {"extra": 1}


def test_r2_3_json_export_is_v3_with_v2_fields_and_v1_mirror() -> None:
    card = read_card(fixture("st_content_CapoGPT.v2-text-before-idat.png"))
    out = write_json(card)
    obj = json.loads(out)
    assert out.startswith(b'{\n    "spec": "chara_card_v3"')
    v2_keys = {"name", "description", "personality", "scenario", "first_mes", "mes_example",
               "creator_notes", "system_prompt", "post_history_instructions",
               "alternate_greetings", "tags", "creator", "character_version", "extensions"}
    assert v2_keys <= set(obj["data"])
    assert obj["first_mes"] == card.data["first_mes"]


def test_r2_3_card_without_image_gets_a_placeholder_and_other_images_convert() -> None:
    card = parse_card_object(v3_card(name="NoImage"))
    out = write_png(card)
    Image.open(io.BytesIO(out)).verify()
    jpeg = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 0, 0)).save(jpeg, format="JPEG")
    converted = write_png(card, image=jpeg.getvalue())
    assert converted.startswith(b"\x89PNG") and read_card(converted).name == "NoImage"


def test_r2_3_data_uri_assets_are_decoded_and_kept_on_json_export() -> None:
    uri = "data:image/png;base64," + base64.b64encode(b"PIXELS").decode()
    card = parse_card_object(v3_card(assets=[{"type": "background", "uri": uri, "name": "main",
                                              "ext": "png"}]))
    assert card.assets[0].data == b"PIXELS"
    assert json.loads(write_json(card))["data"]["assets"][0]["uri"] == uri


def test_r2_3_lone_surrogate_escape_becomes_replacement_character() -> None:
    card = read_card(b'{"name": "A\\ud800B", "description": ""}')
    assert card.name == "A\ufffdB" and card.warnings
    assert read_card(write_png(card)).name == "A\ufffdB"


def test_r2_3_numeric_version_and_csv_tags_are_normalised() -> None:
    card = parse_card_object(v3_card(character_version=2.5, tags="x,y",
                                     alternate_greetings="only one"))
    assert card.data["character_version"] == "2.5" and card.data["tags"] == ["x", "y"]
    assert card.data["alternate_greetings"] == ["only one"]


_known = {"assets", "name", "description", "personality", "scenario", "first_mes", "mes_example",
          "creator_notes", "system_prompt", "post_history_instructions", "creator",
          "character_version", "alternate_greetings", "group_only_greetings", "tags",
          "extensions"}
_texts = st.text(max_size=30) | st.sampled_from(["", "a\r\nb", "line\nline", "\u00e9\U0001f600"])
_leaf = (st.none() | st.booleans() | st.integers(-(2**53), 2**53)
         | st.floats(allow_nan=False, allow_infinity=False) | _texts)
_json = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_texts, inner, max_size=3), max_leaves=12)
_data = st.fixed_dictionaries(
    {"name": _texts, "description": _texts, "first_mes": _texts, "mes_example": _texts,
     "tags": st.lists(_texts, max_size=3), "alternate_greetings": st.lists(_texts, max_size=2),
     "extensions": st.dictionaries(_texts, _json, max_size=4)},
    optional={"nickname": _texts, "character_book": st.dictionaries(_texts, _json, max_size=3),
              "source": st.lists(_texts, max_size=2), "creation_date": st.integers(0, 2**40)},
)
_unknown = st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in _known),
                           _json, max_size=3)
_top = st.dictionaries(st.sampled_from(["avatar", "chat", "create_date", "fav", "x-app"]), _json,
                       max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_data, unknown=_unknown, top=_top, spec=st.sampled_from(["v2", "v3"]))
def test_r2_3_generated_cards_round_trip_through_every_writer(data, unknown, top, spec) -> None:
    obj = {"spec": f"chara_card_{spec}", "spec_version": "3.0" if spec == "v3" else "2.0",
           "data": {**unknown, **data}, **top}
    card = parse_card_object(obj)
    assert card.data["extensions"] == data["extensions"]
    for writer in WRITERS:
        again = read_card(writer(card))
        assert again == card, writer.__name__


def test_r2_3_card_asset_defaults_are_fresh_per_card() -> None:
    first, second = Card(spec="v3", data={}), Card(spec="v3", data={})
    first.assets.append(CardAsset("x", "icon", "png", "ccdefault:"))
    assert len(second.assets) == 1
