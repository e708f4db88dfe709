"""The bottom layer: what every phase shares (manifest, results, limits, notebook and file reading).

Modules here import nothing from the other phases of `grader`.
"""
