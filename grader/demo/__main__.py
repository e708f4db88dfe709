"""`python -m grader.demo [OUT]`: the main job on the course in the current folder."""

import sys
from pathlib import Path

from grader.demo import run_demo

raise SystemExit(run_demo(Path.cwd(), Path(sys.argv[1] if len(sys.argv) > 1 else "demo")))
