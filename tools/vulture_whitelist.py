"""Names in grader/ that vulture (`make deadcode`, pyproject.toml [tool.vulture]) reports as
unused, each with where it is used. Vulture only parses this file: each line marks a name used.

Vulture scans grader/ alone, so a name used only by the suites (tests/public, tests/hidden), by
the notebooks, or by a framework (pytest, SQLAlchemy, traitlets, nbformat, dataclasses.asdict)
is listed here. A name that becomes really unused goes from here and from the code.
"""

# ruff: noqa: F821, B018
# (the names are references for vulture to read, never run: `_` stands for any object)

# --- pytest calls these by name (grader/suites/plugin.py is a pytest11 entry point; the runner
# registers grader/suites/runner.py's Inject object as a plugin)
pytest_addoption
pytest_configure
pytest_collection_modifyitems
pytest_runtest_setup
pytest_runtest_makereport
pytest_runtestloop
on_gpu  # a fixture: a test names it as a parameter (tests/hidden/*)
_.__test__  # grader/suites/seeds.py: pytest's flag that test_seed is not a test

# --- the suites' API: called from tests/public and tests/hidden, which vulture does not scan
_.has  # Student.has: `student.has("name")` in the suites (and the vacuous-test check's example)
_.launching  # Function.launching: `student.f.launching("kernel")(...)` in the hidden suites
_.many  # Function.many: the occupancy suite's batched calls (test_occupancy_hidden.py)
_.atomics  # memmodel.ArrayTraffic: read by test_memory_hidden.py and the reports' readers
_.distinct_loaded
_.distinct_stored
_.load_sectors  # memmodel.ArrayTraffic: in result.json (the report's readers, bench)
_.store_sectors
expect_value_error  # grader/suites/testing.py: the helpers the suites import
first_mismatch
unwritten  # grader/suites/testing.py: outputs filled with the grader's own NaN (the suites)
expect_written
require_reproduced
trusted_ms
expect_raises
count_weights
require_course_size

# --- PEP 562 module __getattr__: Python calls it for a lazily imported name
# (grader/github, grader/grading, grader/sandbox __init__)
__getattr__

# --- read through dataclasses.asdict / fields(), i.e. written to JSON, or read by the notebooks
# grader/core/course.py SMLimits: `as_dict()` is the plain dict a notebook's occupancy() takes
_.max_blocks
_.registers
_.register_granularity
_.max_registers_per_thread
_.max_registers_per_block
_.register_sub_partitions
_.shared_memory_granularity
_.reserved_shared_memory_per_block
_.as_dict  # called by the occupancy suites (tests/hidden, tests/public)
# grader/core/course.py Hardware, Assignment, Course: course.toml's values, read by the suites
# and tests (tests/unit/core/test_course.py) and embedded in the notebooks (release/embed.py)
_.fp32_tflops
_.int8_tensor_tops
_.sm_count
_.pcie_gbs
_.needs_gpu
_.timezone
# grader/core/results.py Environment and GradeResult: fields of result.json (asdict)
_.bubblewrap
_.schema_version  # also grader/reports/class_data.py ClassReport: a field of class.json
# grader/reports/class_data.py ClassReport.similarity: a field of class.json (asdict)
_.similarity
# grader/batch/merge.py MergedClass.class_report: set by merge, read by its callers' tests
_.class_report

# --- attributes written for another library to read
_.returns  # grader/core/kernel_source.py: an ast.FunctionDef's field, read by ast.unparse
_.transport  # grader/core/kernels.py: traitlets Config keys nbclient's KernelManager reads
_.ip
_.abort  # grader/simt/simulator.py: a simulator BlockThread's flag, read by its syncthreads
_.syncthreads  # grader/simt/simulator.py: Carrier's, called by the simulator's cuda.syncthreads()
_.thread_id  # grader/simt/simulator.py: a carrier's, read by the simulator's cuda.laneid
_.code_stub  # grader/release/build.py: a traitlets trait nbgrader's ClearSolutions reads
_.nbformat  # grader/release/build.py: NotebookNode fields nbformat writes
_.nbformat_minor
_.needs_manual_grade  # grader/gradebook.py: SQLAlchemy columns of nbgrader's Grade
_.late_submission_penalty  # ... and of its SubmittedNotebook

# --- kept on purpose
# grader/core/cubin.py: its API, for the sandboxed compile worker (issue 42) and tests/unit/core/
# test_cubin.py; the KernelResources fields are read by their callers
_.shared_bytes
_.local_bytes
_.spill_stores
_.spill_loads
sass
# grader/suites/timing.py: called by the hidden GPU tests (tests/hidden/gpu_fundamentals)
device_of
torch_target
baseline_add
_.output_tail  # grader/sandbox/backend.py, _Worker.output_tail: read by the sandbox tests
STATUSES  # grader/reports/class_data.py: the ClassRow.status values, named at that field
_.token_coverage  # grader/reports/similarity.py: copydetect's coverage, kept with the hashes
# grader/simt/simulator.py, _Collectives: Numba's simulator calls these on
# threading.current_thread() (kernelapi.FakeCUDAModule.syncthreads_count/and/or)
_.syncthreads_count
_.syncthreads_and
_.syncthreads_or
_.__iter__  # grader/simt/sanitizer.py: the in-kernel array's; called when a kernel iterates one
