"""Print each seeded rule's catch rate and false-positive rate on the corpus it ships with.

Usage: python scripts/rule_corpus.py [--show N] [--seeds FILE]

`--seeds FILE` measures other seed definitions (a JSON list of rules, e.g. the first release's
tests/rules/data/seeds_v1.json) on the same corpora. Exits 1 if a hard rule misses a sample or
lets more than 1 % false positives through. To measure the rules stored in a database on a
corpus of your own, use `evacore rules test --corpus FILE`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evacore.rules import SEEDS, Rule, measure, report_lines, shipped_corpus


def _rules_from(path: Path) -> tuple[Rule, ...]:
    keep = ("name", "scope", "condition", "negate", "when", "text", "repeat", "enabled")
    out = []
    for data in json.loads(path.read_text(encoding="utf-8")):
        fields = {key: data[key] for key in keep if key in data}
        fields["when"] = tuple(fields.get("when") or ())
        out.append(Rule(**fields))
    return tuple(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=5, help="misses / false positives listed")
    parser.add_argument("--seeds", type=Path, help="a JSON list of rules to measure instead")
    args = parser.parse_args()
    rules = _rules_from(args.seeds) if args.seeds else SEEDS
    samples = [sample for rule in rules for sample in shipped_corpus(rule.name)]
    scores = measure(rules, samples)
    print("\n".join(report_lines(scores, show=args.show)))
    hard = {rule.name for rule in rules if rule.scope == "text"}
    failing = [
        s.rule for s in scores if s.rule in hard
        and (s.catch_rate != 1.0 or (s.false_positive_rate or 0.0) > 0.01)
    ]
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
