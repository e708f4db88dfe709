"""What every grading child needs before its first test, imported once per batch.

`grader.batch.children.context` names this module as its fork server's preload: the server
imports it, and every child forked from it starts with these loaded instead of importing them
itself (about a second of CPU per child: pytest, hypothesis, numpy, jsonschema, jupytext and the
grader's grading path). Only modules whose import reads nothing a grading may set for itself:
never numba, whose CUDA target is fixed from the environment when it is first imported
(`grader.core.device.prepare_numba`, in each grading), nor torch.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - imported for the children, not used here
import jsonschema  # noqa: F401
import numpy  # noqa: F401
import pytest  # noqa: F401

import grader.batch.entry  # noqa: F401 - the grading path: grading, suites, sandbox
from grader.core.notebook import jupytext_module

jupytext_module()
