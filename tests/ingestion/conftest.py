"""Shared test setup for ingestion tests."""

import os
from pathlib import Path

# tiktoken downloads its BPE files on first use; tests use the copy kept beside the repository.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(__file__).parents[2] / ".." / "shared" / "tiktoken"))
