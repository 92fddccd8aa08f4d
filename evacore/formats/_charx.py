"""CHARX (ZIP) containers: bounded, path-checked reading and deterministic writing.

Must not: interpret card JSON or asset descriptors (cards.py does); only bytes in and out.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from evacore.errors import ImportInvalid, TooLarge
from evacore.formats.limits import Limits

ZIP_MAGIC = b"PK\x03\x04"
_STORED_EXTS = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".avif", ".mp3", ".ogg", ".mp4",
                ".webm", ".m4a", ".opus", ".zip", ".risum", ".woff2")
_READ_BLOCK = 1 << 20


def _check_name(name: str) -> None:
    parts = name.replace("\\", "/").split("/")
    if (
        name.startswith(("/", "\\"))
        or (len(name) > 1 and name[1] == ":")
        or any(part == ".." for part in parts)
    ):
        raise ImportInvalid(f"CHARX entry {name!r} escapes the archive root")


class Archive:
    """A validated CHARX archive; every read counts against one uncompressed budget."""

    def __init__(self, data: bytes, limits: Limits) -> None:
        self._limits = limits
        self._budget = limits.max_zip_total_bytes
        self._zip = self._open(data)
        infos = self._zip.infolist()
        if len(infos) > limits.max_zip_entries:
            raise TooLarge(
                f"CHARX has {len(infos)} entries; the limit is {limits.max_zip_entries}",
                limit=limits.max_zip_entries,
            )
        declared = 0
        self.entries: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            _check_name(info.filename)
            if info.flag_bits & 0x1:
                raise ImportInvalid(f"CHARX entry {info.filename!r} is encrypted")
            declared += info.file_size
            if not info.is_dir():
                self.entries.setdefault(info.filename, info)
        if declared > self._budget:
            raise TooLarge(
                f"CHARX declares {declared} uncompressed bytes; the limit is {self._budget}",
                limit=self._budget,
            )

    @staticmethod
    def _open(data: bytes) -> zipfile.ZipFile:
        start = data.find(ZIP_MAGIC)
        for candidate in (data, data[start:] if start > 0 else None):
            if candidate is None:
                continue
            try:
                return zipfile.ZipFile(io.BytesIO(candidate))
            except (zipfile.BadZipFile, ValueError, OSError, NotImplementedError):
                continue
        raise ImportInvalid("CHARX is not a readable ZIP archive")

    def read(self, name: str) -> bytes:
        """Read one entry, stopping as soon as the total budget is exceeded."""
        info = self.entries[name]
        parts: list[bytes] = []
        try:
            with self._zip.open(info) as stream:
                while True:
                    block = stream.read(min(_READ_BLOCK, self._budget + 1))
                    if not block:
                        break
                    self._budget -= len(block)
                    if self._budget < 0:
                        raise TooLarge(
                            "CHARX expands past "
                            f"{self._limits.max_zip_total_bytes} uncompressed bytes",
                            limit=self._limits.max_zip_total_bytes,
                        )
                    parts.append(block)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError,
                ValueError) as exc:
            raise ImportInvalid(f"CHARX entry {name!r} cannot be read: {exc}") from None
        return b"".join(parts)


def write_archive(files: dict[str, bytes]) -> bytes:
    """A ZIP with fixed timestamps; already-compressed media are stored, the rest deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, payload in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            stored = name.lower().endswith(_STORED_EXTS)
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, payload)
    return out.getvalue()
