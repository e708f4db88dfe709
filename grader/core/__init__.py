"""The bottom layer: what every phase shares (manifest, results, limits, notebook and file reading).

Modules here import nothing from the other phases of `grader`. Unlike the phase packages, core
re-exports nothing: each module is imported by name (`from grader.core.course import Course`),
so that a process loads only the pieces it uses (the sandbox worker, `grader --help`).
"""
