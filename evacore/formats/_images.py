"""Card images through Pillow, safely: read an image's size from its header, refuse one past
the pixel limit before a single pixel is decoded, convert a non-PNG image to PNG for
export, and draw the placeholder portrait.

Must not: decode an image whose header has not been checked against the limit (Pillow's
`Image.open` is lazy: it reads the header; pixels are decoded by `load()`, `convert()`,
`save()`), or let a Pillow exception escape as anything but an evacore error.
"""

from __future__ import annotations

import io
import re
import warnings
from functools import lru_cache

from PIL import Image, UnidentifiedImageError

from evacore.errors import InvalidInput, TooLarge

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")

# Pillow warns about images past its own limit when it opens them; every image opened here
# is checked against a lower limit of ours before it is decoded, so the warning says nothing.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


class _Oversized(Exception):
    """Pillow refused to even open the image: more pixels than its own hard limit."""

    def __init__(self, pixels: int | None) -> None:
        super().__init__(pixels)
        self.pixels = pixels


def _open_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header; None when Pillow does not know the format.

    Raises _Oversized when Pillow itself refuses the size (its DecompressionBombError).
    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
    except Image.DecompressionBombError as exc:
        found = _BOMB_PIXELS.search(str(exc))
        raise _Oversized(int(found.group(1)) if found else None) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, IndexError,
            KeyError, TypeError, ZeroDivisionError):
        # a file Pillow cannot parse is not an image we would ever decode
        return None
    return int(width), int(height)


def _describe(what: str, size: tuple[int, int] | None, pixels: int | None) -> str:
    if size is not None:
        width, height = size
        return f"{what} is {width}×{height} pixels ({width * height} pixels)"
    if pixels is not None:
        return f"{what} has {pixels} pixels"
    return f"{what} has too many pixels to open"


def _measure(data: bytes, limit: int, what: str) -> tuple[str | None, tuple[int, int] | None]:
    """(a description when the image is past `limit` else None, its size if known)."""
    try:
        size = _open_size(data)
    except _Oversized as exc:
        return _describe(what, None, exc.pixels), None
    if size is not None and size[0] * size[1] > limit:
        return _describe(what, size, None), size
    return None, size


def check_pixels(data: bytes, limit: int, what: str) -> None:
    """Refuse (TooLarge, 413) an image whose header declares more than `limit` pixels;
    bytes that are no image Pillow knows pass (they are never decoded)."""
    problem, _ = _measure(data, limit, what)
    if problem is not None:
        raise TooLarge(f"{problem}; the limit is {limit} pixels", limit=limit)


def ensure_png(image: bytes, limit: int) -> bytes:
    """PNG bytes: PNGs (and APNGs) pass through untouched (nothing is decoded); another
    image is converted when its header shows at most `limit` pixels, else InvalidInput."""
    if image.startswith(PNG_SIGNATURE):
        return image
    problem, size = _measure(image, limit, "the card image")
    if problem is not None:
        raise InvalidInput(
            f"{problem}; a PNG export converts images of at most {limit} pixels. Export the "
            "card as JSON or CHARX, which keep the image as it is", limit=limit)
    if size is None:
        raise InvalidInput("the card image cannot be converted to PNG: not an image format "
                           "that can be read")
    try:
        with Image.open(io.BytesIO(image)) as img:
            out = io.BytesIO()
            img.save(out, format="PNG")
            return out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError,
            Image.DecompressionBombError) as exc:
        raise InvalidInput(f"the card image cannot be converted to PNG: {exc}") from None


@lru_cache(maxsize=1)
def placeholder() -> bytes:
    """A small 2:3 placeholder portrait for cards that have no image."""
    out = io.BytesIO()
    Image.new("RGB", (64, 96), (96, 88, 128)).save(out, format="PNG")
    return out.getvalue()
