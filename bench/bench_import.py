"""Benchmark the parse part of card import: generate PNG cards on disk, read them with read_card.

Must not: touch a database or the network; storing imported cards is measured elsewhere.
"""

from __future__ import annotations

import io
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image

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


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Generate 1,000 PNG cards (100 when quick), then time `read_card` over all of them."""
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
    note = f"{count} generated PNG cards (~{total_bytes // count // 1024} kB each, 20-entry book)"
    row = {"bench": "import", "target": None, "met": None, "note": note}
    return [
        {**row, "metric": "cards_per_second", "value": count / elapsed, "unit": "cards/s"},
        {**row, "metric": "total_seconds", "value": elapsed, "unit": "s"},
        {**row, "metric": "p50_ms_per_card", "value": statistics.median(per_card) * 1000,
         "unit": "ms"},
        {**row, "metric": "max_ms_per_card", "value": max(per_card) * 1000, "unit": "ms"},
        {**row, "metric": "throughput", "value": total_bytes / elapsed / 1024 / 1024,
         "unit": "MiB/s"},
    ]


if __name__ == "__main__":
    for result in run(quick=True):
        print(f"{result['metric']:>18}: {result['value']:10.2f} {result['unit']}")
