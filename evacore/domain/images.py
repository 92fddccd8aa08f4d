"""The images of a message (R8.3 `message.images`): each entry is a URL string — a data URL
`data:image/<type>;base64,<data>` or an `http(s)://` address — or an object
`{"url": <such a URL>, "detail": "auto" | "low" | "high"}` (OpenAI's `image_url` form).

At the door `Images` refuses any other shape (`[1]`, `[null]`, `[[1]]`, a bare word, a
non-image data URL) with a 422. On the read side `image_part` turns a stored entry into a
prompt part and gives None for an entry of another shape (stored before these checks):
the history skips it, so one bad row never fails the chat's later tours.

Must not: decode or fetch images, or cap their size (the request and image limits do).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, NotRequired
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    with_config,
)
from typing_extensions import TypedDict

from evacore.domain._typed import invalid, message

MAX_IMAGES = 16
"""Images one message may carry."""
_DATA_URL = re.compile(
    r"data:image/[A-Za-z0-9.+-]{1,100}(?:;[A-Za-z0-9._+-]{1,100}=[A-Za-z0-9._+-]{1,100})*"
    r";base64,[A-Za-z0-9+/]+={0,2}"
)
_URL_CHARS = re.compile(r"[\x21-\x7e]+")


def url_problem(url: str) -> str | None:
    """Why `url` is not an image URL evacore passes to a provider, or None."""
    if url.startswith("data:"):
        if _DATA_URL.fullmatch(url):
            return None
        return "a data URL must be data:image/<type>;base64,<base64 data>"
    if not _URL_CHARS.fullmatch(url):
        return "an image URL has no spaces or control characters"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "an image is a data:image/… URL or an http(s):// address"
    return None


def _check_url(url: str) -> str:
    problem = url_problem(url)
    if problem is not None:
        raise invalid(problem)
    return url


ImageUrl = Annotated[str, Field(strict=True, min_length=1), AfterValidator(_check_url)]


@with_config(ConfigDict(extra="forbid", strict=True))
class ImageObject(TypedDict):
    """An image in OpenAI's `image_url` form."""

    url: ImageUrl
    detail: NotRequired[Literal["auto", "low", "high"]]


_OBJECT = TypeAdapter(ImageObject)


def _check_image(value: Any) -> Any:
    """One message image: a URL string or an `{"url", "detail"}` object (one clear error)."""
    if isinstance(value, str):
        return _check_url(value)
    if isinstance(value, dict):
        try:
            return _OBJECT.validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            raise invalid(f"{where}: {message(first)}" if where else message(first)
                             ) from None
    raise invalid('an image is a URL string or an object {"url": …, "detail": …}, '
                     f"not {type(value).__name__ if value is not None else 'null'}")


Image = Annotated[Any, AfterValidator(_check_image),
                  WithJsonSchema({"anyOf": [{"type": "string", "minLength": 1},
                                            _OBJECT.json_schema()]})]
"""One entry of `message.images`, validated to a plain string or dict."""
Images = Annotated[list[Image], Field(max_length=MAX_IMAGES)]


def image_part(stored: Any) -> dict[str, Any] | None:
    """A stored image as an OpenAI `image_url` content part; None for an entry that is not
    one of the accepted shapes."""
    if isinstance(stored, str):
        url, detail = stored, None
    elif isinstance(stored, dict) and isinstance(stored.get("url"), str):
        url, detail = stored["url"], stored.get("detail")
    else:
        return None
    if url_problem(url) is not None:
        return None
    image: dict[str, Any] = {"url": url}
    if detail in ("auto", "low", "high"):
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}
