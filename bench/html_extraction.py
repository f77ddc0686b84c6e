"""Main-text extraction from HTML, scored on ../shared/eval/html-dev (30 real pages).

The rule is the one in that folder's README: whole-snippet containment after whitespace
normalisation, counts pooled over pages. It prints must-contain recall, must-not-contain leak
rate, the pages whose text decoded right (every must-contain snippet that needs a non-ASCII
character is found, and no U+FFFD in the text) and, per page, the snippets missed or leaked.

The text scored is what gets indexed: the document title, then each section's heading and
text. ``--extractor trafilatura`` scores ``trafilatura.extract(html_bytes)`` with its
defaults, the reference in the README.

Run from the repository root::

    uv run --frozen --no-sync python -m bench.html_extraction [--data PATH] [--extractor ours|trafilatura]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "eval" / "html-dev"
_SPACE = re.compile(r"\s+")


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass(slots=True)
class PageScore:
    name: str
    missed: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    decoded_right: bool = True
    error: str | None = None


@dataclass(slots=True)
class Score:
    found: int = 0
    must_contain: int = 0
    leaked: int = 0
    must_not_contain: int = 0
    pages_decoded_right: int = 0
    pages: list[PageScore] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.found / self.must_contain

    @property
    def leak_rate(self) -> float:
        return self.leaked / self.must_not_contain


def ours(data: bytes) -> str:
    """The service's extractor, rendered as it is indexed: title, then heading and text per section."""
    from app.ingestion.extract_markup import extract_html  # noqa: PLC0415 - keeps --help fast

    extracted = extract_html(data)
    parts = [extracted.title or ""]
    for section in extracted.sections:
        if section.heading:
            parts.append(section.heading.rsplit(" > ", 1)[-1])
        parts.append(section.text)
    return "\n\n".join(parts)


def trafilatura_defaults(data: bytes) -> str:
    import trafilatura  # noqa: PLC0415

    return trafilatura.extract(data) or ""


EXTRACTORS: dict[str, Callable[[bytes], str]] = {"ours": ours, "trafilatura": trafilatura_defaults}


def score(data_dir: Path, extractor: Callable[[bytes], str]) -> Score:
    total = Score()
    with (data_dir / "manifest.tsv").open(encoding="utf-8", newline="") as manifest:
        rows = list(csv.DictReader(manifest, delimiter="\t"))
    for row in rows:
        page = PageScore(name=row["filename"])
        must_contain = [_normalise(s) for s in json.loads(row["must_contain_json"])]
        must_not = [_normalise(s) for s in json.loads(row["must_not_contain_json"])]
        try:
            text = _normalise(extractor((data_dir / row["filename"]).read_bytes()))
        except Exception as exc:
            page.error = f"{type(exc).__name__}: {exc}"
            text = ""
        page.missed = [s for s in must_contain if s not in text]
        page.leaked = [s for s in must_not if s in text]
        non_ascii = [s for s in must_contain if not s.isascii()]
        page.decoded_right = bool(text) and "\ufffd" not in text and all(s in text for s in non_ascii)
        total.must_contain += len(must_contain)
        total.found += len(must_contain) - len(page.missed)
        total.must_not_contain += len(must_not)
        total.leaked += len(page.leaked)
        total.pages_decoded_right += page.decoded_right
        total.pages.append(page)
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--extractor", choices=sorted(EXTRACTORS), default="ours")
    args = parser.parse_args(argv)
    if not (args.data / "manifest.tsv").exists():
        sys.exit(f"no manifest.tsv in {args.data}")
    result = score(args.data, EXTRACTORS[args.extractor])
    for page in result.pages:
        if page.missed or page.leaked or page.error or not page.decoded_right:
            print(page.name + ("" if page.decoded_right else "  [NOT DECODED RIGHT]"))
            if page.error:
                print(f"  error: {page.error}")
            for snippet in page.missed:
                print(f"  missed: {snippet!r}")
            for snippet in page.leaked:
                print(f"  leaked: {snippet!r}")
    pages = len(result.pages)
    print(
        f"{args.extractor}: must-contain in {result.found}/{result.must_contain} = {result.recall:.1%}; "
        f"must-not-contain in {result.leaked}/{result.must_not_contain} = {result.leak_rate:.1%}; "
        f"pages decoded right {result.pages_decoded_right}/{pages}"
    )


if __name__ == "__main__":
    main()
