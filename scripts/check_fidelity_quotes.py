#!/usr/bin/env python3
"""Checks the quotes of the lab's fidelity tables against the papers' text.

Each row of DIR/*/fidelity.json quotes a paper file and a line; this finds every part of the
quote (the parts between "..." elisions) on that line, ignoring case, spacing and the
transcription's lost spaces, and lists the quotes it cannot find. The papers are not in the
repository: give their folder (shared/papers in the project's workspace).

    python3 scripts/check_fidelity_quotes.py docs/lab ../shared/papers
"""

import json
import pathlib
import re
import sys


def squash(text: str) -> str:
    text = re.sub(r"<sup>[^<]*</sup>|<[^>]*>", "", text)  # the transcription's tags, footnote marks
    return re.sub(r"[^0-9a-z%.]", "", text.lower())


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    lab, papers = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    tables = sorted(lab.glob("*/fidelity.json"))
    if not tables:
        print(f"no */fidelity.json under {lab}", file=sys.stderr)
        return 2
    checked, missing = 0, []
    for path in tables:
        for table in json.loads(path.read_text()):
            for param in table["params"]:
                quote = param.get("paper")
                if not quote:
                    continue
                lines = (papers / quote["file"]).read_text().splitlines()
                line = squash(lines[quote["line"] - 1]) if quote["line"] <= len(lines) else ""
                # A quote may name a table or figure it comes from before a colon.
                text = quote["text"].split(": ", 1)[-1] if quote["text"].startswith(("Table", "Figure")) else quote["text"]
                parts = [squash(p) for p in re.split(r"\.\.\.|;", text) if squash(p)]
                checked += 1
                if not all(p in line for p in parts):
                    missing.append(f"{path}: {table['result']}: '{param['name']}': {quote['file']} line {quote['line']}: \"{quote['text']}\"")
    for m in missing:
        print(m)
    print(f"{checked} quotes checked, {len(missing)} not found on their line")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
