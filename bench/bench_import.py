"""Benchmark card import: generate PNG cards on disk, time `read_card` over them, then time the
database import of the whole folder through the `evacore import` code path (Rich progress).

Must not: touch the network or a configured database; the import goes into a fresh SQLite
database in a temporary data folder.
"""

from __future__ import annotations

import asyncio
import io
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image
from rich.console import Console

from evacore.cli.transfer import run_import
from evacore.config import Settings
from evacore.formats.cards import parse_card_object, read_card, write_png


def _portrait(rng: random.Random) -> bytes:
    """A 128x192 noisy portrait (about 70 kB as PNG, like a small real card image)."""
    image = Image.frombytes("RGB", (128, 192), rng.randbytes(128 * 192 * 3))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _card_object(index: int, rng: random.Random) -> dict[str, Any]:
    words = ["lantern", "harbor", "quiet", "storm", "amber", "forest", "letters", "tide"]
    prose = " ".join(rng.choice(words) for _ in range(300))
    entries = [
        {"id": n, "keys": [rng.choice(words), f"key{n}"], "secondary_keys": [],
         "content": f"Entry {n}: {prose[:400]}", "extensions": {"position": 0, "depth": 4},
         "enabled": True, "insertion_order": 100, "constant": n == 0}
        for n in range(20)
    ]
    return {
        "spec": "chara_card_v2", "spec_version": "2.0",
        "data": {
            "name": f"Bench {index}", "description": prose, "personality": prose[:200],
            "scenario": prose[:300], "first_mes": f"*waves* Hello from card {index}.",
            "mes_example": "<START>\r\n{{user}}: Hi\r\n{{char}}: " + prose[:200],
            "alternate_greetings": ["Hi!", "Hey there."], "tags": ["bench", words[index % 8]],
            "creator": "bench", "character_version": "1.0",
            "extensions": {"talkativeness": "0.5", "fav": False, "world": ""},
            "character_book": {"name": f"Book {index}", "extensions": {}, "entries": entries},
        },
    }


def _db_import(folder: Path, count: int) -> tuple[float, float, int]:
    """Import the folder into a fresh SQLite database as `evacore import FOLDER` does."""
    with tempfile.TemporaryDirectory(prefix="evacore-bench-db-") as data:
        settings = Settings(data_dir=Path(data), master_token="evc_bench_master_token_0123456789")
        summary = asyncio.run(run_import([folder], settings, out=Console(stderr=True)))
    imported = summary.count("imported")
    assert imported == count, f"only {imported} of {count} cards were imported"
    return summary.seconds, summary.startup_seconds, imported


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Generate 1,000 PNG cards (100 when quick), time `read_card` over all of them, then the
    database import of the folder (one transaction per card, book stored as a lorebook)."""
    count = 100 if quick else 1000
    rng = random.Random(1234)
    portraits = [_portrait(rng) for _ in range(4)]
    with tempfile.TemporaryDirectory(prefix="evacore-bench-import-") as folder:
        paths: list[Path] = []
        for index in range(count):
            card = parse_card_object(_card_object(index, rng))
            path = Path(folder) / f"card_{index:04d}.png"
            path.write_bytes(write_png(card, image=portraits[index % len(portraits)]))
            paths.append(path)
        total_bytes = sum(path.stat().st_size for path in paths)
        per_card: list[float] = []
        started = time.perf_counter()
        for path in paths:
            begin = time.perf_counter()
            card = read_card(path.read_bytes(), filename=path.name)
            per_card.append(time.perf_counter() - begin)
            assert card.data["character_book"]["entries"]
        elapsed = time.perf_counter() - started
        db_seconds, startup, imported = _db_import(Path(folder), count)
    note = f"{count} generated PNG cards (~{total_bytes // count // 1024} kB each, 20-entry book)"
    row = {"bench": "import", "target": None, "met": None, "note": note}
    db_note = note + "; SQLite, one transaction per card, after the core started"
    return [
        {**row, "metric": "cards_per_second", "value": count / elapsed, "unit": "cards/s"},
        {**row, "metric": "total_seconds", "value": elapsed, "unit": "s"},
        {**row, "metric": "p50_ms_per_card", "value": statistics.median(per_card) * 1000,
         "unit": "ms"},
        {**row, "metric": "max_ms_per_card", "value": max(per_card) * 1000, "unit": "ms"},
        {**row, "metric": "throughput", "value": total_bytes / elapsed / 1024 / 1024,
         "unit": "MiB/s"},
        {**row, "note": db_note, "metric": "db_import_cards_per_second",
         "value": imported / db_seconds, "unit": "cards/s"},
        {**row, "note": db_note, "metric": "db_import_total_seconds", "value": db_seconds,
         "unit": "s"},
        {**row, "note": "evacore import: open the database and start the core",
         "metric": "db_import_startup_seconds", "value": startup, "unit": "s"},
    ]


if __name__ == "__main__":
    for result in run(quick=True):
        print(f"{result['metric']:>18}: {result['value']:10.2f} {result['unit']}")
