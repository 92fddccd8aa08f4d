"""Card asset descriptors: parse them, resolve their bytes, and choose URIs when writing.

Must not: open ZIP or PNG containers itself; callers pass a lookup for embedded paths.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from evacore.formats._card_model import CardAsset

EMBED_SCHEMES = ("embeded://", "embedded://", "__asset:")
_CATEGORY = {
    "images": ("png", "jpg", "jpeg", "webp", "gif", "avif", "bmp", "svg", "apng"),
    "audio": ("mp3", "wav", "ogg", "flac", "m4a", "aac", "opus"),
    "video": ("mp4", "webm", "mov", "mkv", "avi"),
    "fonts": ("ttf", "otf", "woff", "woff2"),
    "l2d": ("moc3",),
    "3d": ("glb", "gltf", "vrm", "fbx", "obj"),
    "ai": ("onnx", "safetensors", "gguf"),
    "code": ("js", "lua", "py", "ts"),
}
_MIME = {
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp",
    "gif": "image/gif", "avif": "image/avif", "svg": "image/svg+xml", "mp3": "audio/mpeg",
    "wav": "audio/wav", "ogg": "audio/ogg", "mp4": "video/mp4", "webm": "video/webm",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DESCRIPTOR_KEYS = ("type", "uri", "name", "ext")


def parse_descriptors(raw: Any, warnings: list[str]) -> list[CardAsset]:
    """Turn a card's `assets` array into CardAssets (unknown keys kept in `extra`)."""
    if not isinstance(raw, list):
        warnings.append("card 'assets' is not an array; it was ignored")
        return []
    assets: list[CardAsset] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            warnings.append(f"card asset #{index} is not an object; it was ignored")
            continue
        fields = {k: "" if item.get(k) is None else str(item.get(k)) for k in _DESCRIPTOR_KEYS}
        extra = {k: v for k, v in item.items() if k not in _DESCRIPTOR_KEYS}
        assets.append(CardAsset(fields["name"], fields["type"], fields["ext"], fields["uri"],
                                extra=extra))
    return assets


def embedded_path(uri: str) -> str | None:
    """The archive path named by an `embeded://`, `embedded://` or `__asset:` URI."""
    lowered = uri.lower()
    for scheme in EMBED_SCHEMES:
        if lowered.startswith(scheme):
            return uri[len(scheme):].lstrip("/")
    return None


def decode_data_uri(uri: str) -> bytes | None:
    """Bytes of a `data:` URI, or None when it is malformed."""
    head, sep, payload = uri[5:].partition(",")
    if not sep:
        return None
    if head.lower().endswith(";base64"):
        compact = "".join(payload.split())
        compact += "=" * (-len(compact) % 4)
        try:
            return base64.b64decode(compact, validate=True)
        except (binascii.Error, ValueError):
            return None
    return urllib.parse.unquote_to_bytes(payload)


def resolve(assets: list[CardAsset], lookup: Callable[[str], bytes | None],
            image: bytes | None, warnings: list[str]) -> None:
    """Fill `data` of each asset whose bytes are in the file (or are the card image)."""
    for asset in assets:
        uri = asset.uri
        if uri.lower().startswith("ccdefault:"):
            asset.data = image
        elif uri.lower().startswith("data:"):
            asset.data = decode_data_uri(uri)
            if asset.data is None:
                warnings.append(f"asset {asset.name!r} has a malformed data: URI")
        else:
            path = embedded_path(uri)
            if path is not None:
                asset.data = lookup(path)
                if asset.data is None:
                    warnings.append(f"asset {asset.name!r} points at missing file {path!r}")


def main_icon(assets: list[CardAsset]) -> CardAsset | None:
    """The icon named `main` that has bytes, else the first icon with bytes."""
    icons = [a for a in assets if a.type == "icon" and a.data is not None]
    for icon in icons:
        if icon.name == "main":
            return icon
    return icons[0] if icons else None


def is_implicit_default(assets: list[CardAsset]) -> bool:
    if len(assets) != 1:
        return False
    only = assets[0]
    return (only.type, only.name, only.ext, only.uri.lower(), only.extra) == (
        "icon", "main", "png", "ccdefault:", {})


def sniff_ext(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:4] == b"GIF8":
        return "gif"
    return "unknown"


def descriptor(asset: CardAsset, uri: str, ext: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": asset.type, "uri": uri, "name": asset.name,
                           "ext": asset.ext if ext is None else ext}
    for key, value in asset.extra.items():
        out.setdefault(key, value)
    return out


def data_uri(data: bytes, ext: str) -> str:
    mime = _MIME.get(ext.lower(), "application/octet-stream")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def archive_path(asset: CardAsset, ext: str, used: set[str]) -> str:
    """A unique ASCII `assets/{type}/{category}/{name}.{ext}` path for a CHARX entry."""
    kind = _UNSAFE.sub("_", asset.type).strip("._") or "other"
    category = next((c for c, exts in _CATEGORY.items() if ext.lower() in exts), "other")
    stem = _UNSAFE.sub("_", asset.name).strip("._") or "asset"
    suffix = _UNSAFE.sub("_", ext).strip("._") or "bin"
    path = f"assets/{kind}/{category}/{stem}.{suffix}"
    count = 2
    while path in used:
        path = f"assets/{kind}/{category}/{stem}-{count}.{suffix}"
        count += 1
    used.add(path)
    return path
