"""`python -m grader.github <verb>`: the workflows' entry point (see `grader.github`)."""

from grader.github import main

raise SystemExit(main())
