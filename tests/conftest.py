from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests run against this checkout even before `pip install -e .`
    sys.path.insert(0, str(ROOT))
