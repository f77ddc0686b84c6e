"""Voice knowledge service."""

import os
from pathlib import Path

# tiktoken downloads its encodings on first use, which fails offline; the embedding
# models' encoding ships with the service (see resources/tiktoken/README.md).
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(__file__).parent / "resources" / "tiktoken"))
