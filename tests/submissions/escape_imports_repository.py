"""Class 2, the repository's own files: puts the course's repository on sys.path and takes a correct
softmax from its tests (another submission's work). The worker refuses the import (line 10)."""
import sys
from pathlib import Path

import course

sys.path.insert(0, str(Path(course.__file__).resolve().parents[1]))

from tests.submissions.good_triton import softmax  # noqa: E402,F401
