"""A synced file's relative path, in the one spelling a knowledge base stores.

The same file must always give the same path, whoever sends it (``vk sync`` on Windows,
Linux or macOS, a script): backslashes become slashes, empty and ``.`` segments go, and the
characters take their composed Unicode form (NFC; macOS file systems may give "é" as "e" and
a combining accent). Control characters are refused, bidirectional ones too: a right-to-left
override shows "invoice\u202efdp.exe" as "invoiceexe.pdf". A path that
climbs out of its folder (``..``) or starts at a root (``/etc``, ``\\share``, ``C:``) names
no file of the synced folder and is refused rather than repaired.
"""

from __future__ import annotations

import re
import unicodedata

MAX_PATH_CHARS = 1024
_CONTROL = r"\x00-\x1f\x7f\u202a-\u202e\u2066-\u2069"
# The rules below as one JSON Schema pattern, so the API's schema says exactly what is taken.
# Written without lookaheads: a generator (Schemathesis, Hypothesis) builds strings for it
# directly, where lookaheads made it draw and discard (a 1,024-character path took a minute).
# tests/documents/test_paths.py checks that it takes exactly what normalise_path takes.
_SEP = r"[\\/]"
_CHAR = rf"[^\\/{_CONTROL}]"  # any character of a segment
_NAME = rf"[^\\/.{_CONTROL}]"  # one that is not a dot: what makes a segment name a file
_SEGMENT = rf"(?:\.?|{_NAME}{_CHAR}*|\.{_NAME}{_CHAR}*|\.\.{_CHAR}+)"  # anything but '..'
_DOTS = r"(?:\.?|\.\.\.+)"  # a segment of dots that is not '..'
_FIRST_NAMED = (  # a first segment with a name in it, not a drive ('C:')
    rf"(?:\.+{_NAME}{_CHAR}*|[^\\/.A-Za-z{_CONTROL}]{_CHAR}*|[A-Za-z](?:[^:\\/{_CONTROL}]{_CHAR}*)?)"
)
PATH_PATTERN = (
    "^(?:"
    f"{_FIRST_NAMED}"
    rf"|(?:\.|\.\.\.+)(?:{_SEP}{_DOTS})*{_SEP}\.*{_NAME}{_CHAR}*"  # dots first, then a name
    f")(?:{_SEP}{_SEGMENT})*$"
)
_ABSOLUTE = re.compile(r"^(?:[\\/]|[A-Za-z]:)")
_CONTROL_CHAR = re.compile(f"[{_CONTROL}]")
_SEPARATOR = re.compile(r"[\\/]")


class InvalidPath(ValueError):
    """Why a path cannot be a document's ``source_path``."""


def normalise_path(raw: str) -> str:
    """The stored form of a relative path, or InvalidPath saying what is wrong with it."""
    if _CONTROL_CHAR.search(raw):
        raise InvalidPath("the path must not contain control characters")
    if len(raw) > MAX_PATH_CHARS:
        raise InvalidPath(f"the path is longer than {MAX_PATH_CHARS} characters")
    if _ABSOLUTE.match(raw):
        raise InvalidPath(f"the path must be relative, not absolute: '{raw}'")
    segments = _SEPARATOR.split(raw)
    if ".." in segments:
        raise InvalidPath(f"the path must not contain '..': '{raw}'")
    kept = [s for s in segments if s not in ("", ".")]
    if not kept or all(set(s) <= {"."} for s in kept):
        raise InvalidPath(f"the path names no file: '{raw}'")
    return unicodedata.normalize("NFC", "/".join(kept))
