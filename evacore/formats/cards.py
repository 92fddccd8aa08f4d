"""Read and write character cards V1/V2/V3 as PNG (tEXt chunks), JSON and CHARX (ZIP).

Must not: touch a database or HTTP, or change card fields beyond normalising (no dates are
stamped on export; callers update `modification_date` themselves).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, Literal

from evacore.errors import ImportInvalid, TooLarge, UnsupportedMedia
from evacore.formats import _assets, _card_data, _images, _png
from evacore.formats._card_model import Card, CardAsset, default_assets
from evacore.formats._charx import ZIP_MAGIC, Archive, write_archive
from evacore.formats._json import dump_compact, dump_pretty, load_json_bytes
from evacore.formats.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "Card",
    "CardAsset",
    "CardKind",
    "card_to_object",
    "detect_card_kind",
    "parse_card_object",
    "read_card",
    "write_charx",
    "write_json",
    "write_png",
]

CardKind = Literal["png", "json", "charx"]


def _NO_FILES(path: str) -> bytes | None:
    return None


def detect_card_kind(data: bytes) -> CardKind:
    """Tell a PNG/APNG, JSON or CHARX card apart by its first bytes (never by file name)."""
    if not data:
        raise ImportInvalid("the file is empty")
    if data.startswith(_png.SIGNATURE):
        return "png"
    if data.startswith(ZIP_MAGIC) or (data.startswith(b"\xff\xd8\xff") and ZIP_MAGIC in data):
        return "charx"
    head = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        raise UnsupportedMedia("WEBP cards are not supported; convert the card to PNG")
    raise UnsupportedMedia(
        "unrecognised card file: expected a PNG, a JSON object or a CHARX (ZIP) archive"
    )


def read_card(data: bytes, filename: str | None = None, limits: Limits | None = None) -> Card:
    """Read a card from PNG/APNG, JSON or CHARX bytes; malformed input raises ImportInvalid,
    a card image or image asset past `max_image_pixels` (read from its header) TooLarge."""
    limits = limits or DEFAULT_LIMITS
    try:
        if len(data) > limits.max_input_bytes:
            raise TooLarge(
                f"the file is {len(data)} bytes; the limit is {limits.max_input_bytes}",
                limit=limits.max_input_bytes,
            )
        kind = detect_card_kind(data)
        if kind == "png":
            card = _read_png(data, limits)
        elif kind == "charx":
            card = _read_charx(data, limits)
        else:
            warnings: list[str] = []
            obj = _load_card_json(data, limits, "the card JSON", warnings)
            card = _build(obj, None, _NO_FILES, warnings)
        _check_images(card, limits)
        return card
    except (ImportInvalid, TooLarge, UnsupportedMedia) as exc:
        if filename:
            exc.details.setdefault("filename", filename)
        raise


def _load_card_json(payload: bytes, limits: Limits, what: str, warnings: list[str]) -> Any:
    """The card JSON; a `character_book` past `max_lore_entries` is refused before parsing."""
    return load_json_bytes(payload, limits, what, warnings=warnings,
                           max_items=limits.max_lore_entries)


def _check_images(card: Card, limits: Limits) -> None:
    """Refuse the card when its image or an image asset declares more pixels than allowed."""
    cap = limits.max_image_pixels
    if card.image is not None:
        _images.check_pixels(card.image, cap, "the card image")
    for asset in card.assets:
        if asset.data is not None and asset.data is not card.image:
            _images.check_pixels(asset.data, cap, f"the card's {asset.type or 'asset'} "
                                                  f"{asset.name!r}")


def parse_card_object(obj: Any, image: bytes | None = None) -> Card:
    """Build a Card from an already-parsed JSON value (e.g. an HTTP JSON body)."""
    return _build(obj, image, _NO_FILES, [])


def _build(obj: Any, image: bytes | None, lookup: Callable[[str], bytes | None],
           warnings: list[str]) -> Card:
    spec, raw, extra_top = _card_data.split_card_object(obj, warnings)
    data = _card_data.normalise(raw)
    if "assets" in data:
        assets = _assets.parse_descriptors(data.pop("assets"), warnings)
    else:
        assets = default_assets()
    _assets.resolve(assets, lookup, image, warnings)
    return Card(spec=spec, data=data, extra_top=extra_top, image=image, assets=assets,
                warnings=warnings)


def _decode_base64(raw: bytes, what: str) -> bytes:
    compact = b"".join(raw.split())
    if compact.startswith(b"{"):
        return raw
    compact = compact.replace(b"-", b"+").replace(b"_", b"/")
    compact += b"=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ImportInvalid(f"{what} is not valid base64") from None


def _read_png(data: bytes, limits: Limits) -> Card:
    layout = _png.walk(data, limits)
    warnings: list[str] = []
    if layout.trailing:
        warnings.append(f"{layout.trailing} bytes after the PNG IEND chunk were ignored")
    firsts: dict[str, _png.Chunk] = {}
    asset_chunks: dict[str, _png.Chunk] = {}
    for chunk in layout.chunks:
        word = _png.keyword(chunk)
        if word is None:
            continue
        lowered = word.lower()
        if lowered in _png.CARD_KEYWORDS:
            if lowered in firsts:
                warnings.append(f"duplicate {lowered!r} chunk ignored (the first one is used)")
            firsts.setdefault(lowered, chunk)
        elif lowered.startswith(_png.ASSET_PREFIX):
            asset_chunks.setdefault(word[len(_png.ASSET_PREFIX):].lstrip(":"), chunk)
    if not firsts:
        raise ImportInvalid("the PNG has no character card text chunk ('ccv3' or 'chara')")
    obj: Any = None
    failure: ImportInvalid | TooLarge | None = None
    for word in ("ccv3", "chara"):
        if word not in firsts:
            continue
        what = f"the PNG {word!r} chunk"
        try:
            payload = _decode_base64(_png.text_value(firsts[word], limits), what)
            obj = _load_card_json(payload, limits, what, warnings)
            _card_data.split_card_object(obj, [])
        except (ImportInvalid, TooLarge) as exc:
            failure = failure or exc
            obj = None
            continue
        if failure is not None:
            warnings.append(f"the 'ccv3' chunk is unreadable ({failure.message}); used 'chara'")
        break
    if obj is None:
        assert failure is not None
        raise failure

    def lookup(path: str) -> bytes | None:
        chunk = asset_chunks.get(path)
        if chunk is None:
            return None
        return _decode_base64(_png.text_value(chunk, limits), f"PNG asset chunk {path!r}")

    return _build(obj, _png.strip_card_chunks(data, layout), lookup, warnings)


def _read_charx(data: bytes, limits: Limits) -> Card:
    archive = Archive(data, limits)
    if "card.json" not in archive.entries:
        raise ImportInvalid("the CHARX archive has no card.json at its root")
    warnings: list[str] = []
    card_bytes = archive.read("card.json")
    obj = _load_card_json(card_bytes, limits, "CHARX card.json", warnings)
    used = {"card.json"}

    def lookup(path: str) -> bytes | None:
        if path not in archive.entries:
            return None
        used.add(path)
        return archive.read(path)

    card = _build(obj, None, lookup, warnings)
    icon = _assets.main_icon(card.assets)
    card.image = icon.data if icon else None
    card.extra_files = {n: archive.read(n) for n in archive.entries if n not in used}
    return card


def _asset_descriptors(card: Card, target: str, image: bytes | None,
                       files: dict[str, bytes] | None = None) -> list[dict[str, Any]] | None:
    """Descriptors for the written card; None when they equal the implicit default."""
    if _assets.is_implicit_default(card.assets) and target != "charx":
        return None
    out: list[dict[str, Any]] = []
    used: set[str] = set(files or ())
    for asset in card.assets:
        is_image = image is not None and asset.data is not None and (
            asset.data is card.image or asset.data == card.image)
        if asset.data is None or (target == "json" and asset.uri.lower() == "ccdefault:"):
            out.append(_assets.descriptor(asset, asset.uri))
        elif target == "png" and (is_image or asset.uri.lower() == "ccdefault:"):
            out.append(_assets.descriptor(asset, "ccdefault:", "png"))
        elif target == "charx" and files is not None:
            ext = asset.ext if asset.ext and asset.ext != "unknown" else _assets.sniff_ext(
                asset.data)
            path = _assets.archive_path(asset, ext, used)
            files[path] = asset.data
            out.append(_assets.descriptor(asset, f"embeded://{path}", ext))
        else:
            out.append(_assets.descriptor(asset, _assets.data_uri(asset.data, asset.ext)))
    if target == "charx" and files is not None:
        return out
    return None if _is_default_descriptor(out) else out


def _is_default_descriptor(out: list[dict[str, Any]]) -> bool:
    return out == [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}]


def card_to_object(card: Card, assets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The V3 envelope written by `write_json`: V3 data, V1 mirror fields, extra top keys."""
    data = dict(card.data)
    data.pop("assets", None)
    if assets is None and not _assets.is_implicit_default(card.assets):
        assets = _asset_descriptors(card, "json", card.image)
    if assets is not None:
        data["assets"] = assets
    return _card_data.envelope("chara_card_v3", "3.0", data, card.extra_top)


def write_json(card: Card) -> bytes:
    """V3 JSON (4-space indent, UTF-8) whose data also satisfies V2 and whose top level V1.

    Embedded asset bytes become `data:` URIs; a `ccdefault:` icon stays as it is.
    """
    return dump_pretty(card_to_object(card))


def write_png(card: Card, image: bytes | None = None, limits: Limits | None = None) -> bytes:
    """The card image with a V2 backfill `chara` chunk and a V3 `ccv3` chunk (old ones removed).

    Uses `image`, else the card image, else its main icon, else a small placeholder. A
    non-PNG image is converted when it has at most `max_image_pixels` (else InvalidInput).
    """
    icon = _assets.main_icon(card.assets)
    source = image or card.image or (icon.data if icon else None) or _images.placeholder()
    png = _images.ensure_png(source, (limits or DEFAULT_LIMITS).max_image_pixels)
    stripped = _png.strip_card_chunks(png, _png.walk(png, Limits(max_text_bytes=len(png))))
    data = dict(card.data)
    data.pop("assets", None)
    descriptors = _asset_descriptors(card, "png", source)
    if descriptors is not None:
        data["assets"] = descriptors
    v3 = _card_data.envelope("chara_card_v3", "3.0", data, card.extra_top)
    v2 = _card_data.envelope("chara_card_v2", "2.0", _card_data.v2_backfill(data),
                             card.extra_top)
    chunks = [_png.text_chunk(word, _b64(obj)) for word, obj in (("chara", v2), ("ccv3", v3))]
    return _png.insert_before_iend(stripped, chunks)


def _b64(obj: dict[str, Any]) -> str:
    return base64.b64encode(dump_compact(obj).encode("utf-8")).decode("ascii")


def write_charx(card: Card) -> bytes:
    """A CHARX ZIP: `card.json` (V3) plus every asset with bytes under `embeded://assets/…`."""
    files: dict[str, bytes] = {"card.json": b""}
    assets = list(card.assets)
    if card.image is not None and not any(a.data is not None for a in assets if a.type == "icon"):
        assets.insert(0, CardAsset("main", "icon", _assets.sniff_ext(card.image), "ccdefault:",
                                   card.image))
    view = Card(spec=card.spec, data=card.data, extra_top=card.extra_top, image=card.image,
                assets=assets)
    descriptors = _asset_descriptors(view, "charx", card.image, files)
    files["card.json"] = dump_pretty(card_to_object(card, descriptors or []))
    for name, payload in card.extra_files.items():
        files.setdefault(name, payload)
    return write_archive(files)
