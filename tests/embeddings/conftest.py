"""Shared test setup for embedding tests."""

import os
from pathlib import Path

# tiktoken would download its BPE files on first use; the repository ships them next to it.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(__file__).parents[2] / ".." / "shared" / "tiktoken"))
