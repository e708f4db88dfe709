"""Reports of one grading: markdown (PR comment, job summary), an HTML page, the roofline plot.

`write_reports` (from `outputs`, the one report writer) writes the set for one result;
`markdown.markdown` and `html.html` render them. Student text is escaped once, in `escape`; what
both share is in `common`.

The class report (`class_report`: rendering; `class_data`: the numbers; `similarity`: the pairs)
is imported on its own, by the commands that write it: it loads matplotlib and copydetect.
"""

from __future__ import annotations

from grader.reports.outputs import write_reports

__all__ = ["write_reports"]
