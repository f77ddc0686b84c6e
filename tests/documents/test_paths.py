"""The API schema's pattern for a source_path takes exactly the paths the service stores."""

from __future__ import annotations

import itertools
import re

import pytest

from app.documents.paths import MAX_PATH_CHARS, PATH_PATTERN, InvalidPath, normalise_path

# One of each kind of character the rules tell apart: a drive letter, a colon, a name,
# both separators, a dot, a control character and a bidirectional override.
ALPHABET = ["C", ":", "a", "/", "\\", ".", "\x01", "\u202e"]


def taken(path: str) -> bool:
    try:
        normalise_path(path)
    except InvalidPath:
        return False
    return True


def test_the_pattern_takes_exactly_what_normalise_path_takes():
    disagreements = []
    for length in range(1, 6):
        for chars in itertools.product(ALPHABET, repeat=length):
            path = "".join(chars)
            if bool(re.match(PATH_PATTERN, path)) != taken(path):
                disagreements.append(path)
    assert disagreements == []


@pytest.mark.parametrize(
    ("path", "matches"),
    [
        ("notes/2024/plan.md", True),
        ("./a", True),
        ("a/../b", False),
        ("../a", False),
        ("/etc/passwd", False),
        ("\\\\share\\file", False),
        ("C:file", False),
        ("C.file", True),
        (".../a", True),
        ("./.", False),
        ("..a/b..", True),
    ],
)
def test_the_pattern_on_named_paths(path, matches):
    assert bool(re.match(PATH_PATTERN, path)) is matches
    assert taken(path) is matches


def test_the_pattern_takes_the_longest_path_the_service_takes():
    longest = "a/" * (MAX_PATH_CHARS // 2 - 1) + "ab"
    assert len(longest) == MAX_PATH_CHARS
    assert re.match(PATH_PATTERN, longest)
    assert taken(longest)
