"""A graded kernel as source: what the grader compiles and launches instead of the live object.

Code in the student's process can patch anything there and an object can pretend to be a
dispatcher, so the trusted process never asks that process to launch, compile or time a kernel.
It reads the graded cells with `ast` (nothing is executed here) and extracts, for one kernel:

* the top-level ``def`` decorated with exactly ``@cuda.jit`` (or ``@cuda.jit(...)`` with literal
  arguments only, which are ignored: the grader compiles for its own signatures);
* the ``@cuda.jit(device=True)`` functions it calls, transitively, extracted by the same rules;
* the module-level constants it reads (numbers, tuples of numbers and arithmetic on them), whose
  values the grader computes itself and writes back as literals;
* the imports of ``cuda``, ``numba``, ``math`` and ``numpy`` it names.

Anything else a kernel refers to (another global, a builtin outside numba's few, a dunder
attribute, a default argument, a name that is bound twice) is refused with a `KernelSourceError`
naming the line and what to change. The result, `KernelSource.text`, is a module whose execution
runs only imports, literal assignments and ``def`` statements: no student code runs until the
grader's own ``cuda.jit`` has compiled it (`grader.sandbox.harness.KernelHost`).
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from grader.core import bounded_parse
from grader.core.errors import SubmissionError
from grader.core.stubs import is_stub_body, still_stub

VERSION = 1
ALLOWED_MODULES = ("math", "numpy", "numba", "numba.cuda", "numba.types")
# Builtins numba's CUDA target compiles; every other builtin name in a kernel is refused.
ALLOWED_BUILTINS = frozenset(
    {
        "range",
        "len",
        "min",
        "max",
        "abs",
        "float",
        "int",
        "bool",
        "round",
        "complex",
        "True",
        "False",
        "None",
    }
)
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
MAX_CONSTANT_INT = 1 << 62


class KernelSourceError(SubmissionError):
    """The graded kernel is not something the grader can take from the source (why and what to
    change). Deliberately not a ValueError: a test's ``pytest.raises(ValueError)`` must not pass
    on the grader's refusal."""


@dataclass(frozen=True)
class KernelSource:
    """One kernel, self-contained: `text` defines `name` (undecorated) and its device functions."""

    name: str
    text: str
    device_functions: tuple[str, ...]
    constants: tuple[str, ...]
    version: int = VERSION
    # (line of `text`, line of the graded source) for each statement of the kernel and its
    # device functions: the memory profile names the student's lines, not the extracted text's
    lines: tuple[tuple[int, int], ...] = ()

    def shared_arrays(self) -> dict[int, str]:
        """The variable each ``cuda.shared.array(...)`` of `text` is bound to, by its line."""
        found: dict[int, str] = {}
        for node in ast.walk(ast.parse(self.text)):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)
                and _dotted(node.value.func).endswith("shared.array")
            ):
                found[node.lineno] = node.targets[0].id
        return found


@dataclass
class _Module:
    defs: dict[str, ast.FunctionDef]
    constants: dict[str, ast.expr]
    imports: dict[str, str]  # bound name -> the import statement that binds it
    bindings: dict[str, list[int]]  # every top-level binding of a name: its lines
    filename: str
    values: dict[str, Any] = field(default_factory=dict)  # constants evaluated, each once
    # a graded line as the student's own (`grader.core.sourcemap`); set per call by `_scan`
    where: Callable[[int], str] = str


def _scan(source: str, filename: str, where: Callable[[int], str]) -> _Module:
    """The top level of `source` (read once per source), with `where` for its messages."""
    try:
        mod = _scan_once(source, filename)
    except SyntaxError as exc:
        at = f" ({where(exc.lineno)})" if exc.lineno else ""
        raise KernelSourceError(f"{filename} does not parse{at}: {exc.msg}") from None
    except bounded_parse.SourceTooLarge as exc:
        raise KernelSourceError(str(exc)) from None
    return replace(mod, where=where)  # the parsed tables shared, constants evaluated once


@functools.lru_cache(maxsize=bounded_parse.CACHE_SIZE)
def _scan_once(source: str, filename: str) -> _Module:
    """The parse and scan of one source, kept (callers only read the result)."""
    tree = bounded_parse.parse(source, filename)
    mod = _Module({}, {}, {}, {}, filename)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for n in node.names:
                mod.bindings.setdefault(n, []).append(-node.lineno)
    for node in tree.body:
        _scan_stmt(node, mod, top=True)
    return mod


def _scan_stmt(node: ast.stmt, mod: _Module, top: bool) -> None:
    def bind(name: str) -> None:
        mod.bindings.setdefault(name, []).append(node.lineno)

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        bind(node.name)
        if top and isinstance(node, ast.FunctionDef):
            mod.defs[node.name] = node
        return
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            one = copy.copy(node)
            one.names = [alias]
            stmt = ast.unparse(one)
            if top and mod.imports.get(bound) == stmt:
                continue  # the same import again (one per cell) binds the same module
            bind(bound)
            if top:
                mod.imports[bound] = stmt
        return
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bind(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            for alias in sub.names:
                bind(alias.asname or alias.name.split(".")[0])
    if (
        top
        and isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ):
        mod.constants[node.targets[0].id] = node.value


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _import_module(statement: str) -> str:
    node = cast(ast.Import | ast.ImportFrom, ast.parse(statement).body[0])
    if isinstance(node, ast.ImportFrom):
        return node.module or ""
    return node.names[0].name


def _qualify(path: str, mod: _Module) -> str:
    """The dotted name `path` means through the module's imports ('' when not imported)."""
    root, _, rest = path.partition(".")
    stmt = mod.imports.get(root)
    if stmt is None or len(mod.bindings.get(root, [])) != 1:
        return ""
    node = cast(ast.Import | ast.ImportFrom, ast.parse(stmt).body[0])
    alias = node.names[0]
    if isinstance(node, ast.ImportFrom):
        base = f"{node.module}.{alias.name}"
    else:
        base = alias.name if alias.asname else alias.name.split(".")[0]
    return f"{base}.{rest}" if rest else base


def _jit_kind(fn: ast.FunctionDef, mod: _Module) -> str:
    """'kernel', 'device' or '' for a def whose decorators are not one plain cuda.jit."""
    if len(fn.decorator_list) != 1:
        return ""
    deco = fn.decorator_list[0]
    target, call = (deco.func, deco) if isinstance(deco, ast.Call) else (deco, None)
    if _qualify(_dotted(target), mod) != "numba.cuda.jit":
        return ""
    if call is None:
        return "kernel"
    if not all(_is_literal(arg) for arg in call.args):
        return ""
    device = False
    for kw in call.keywords:
        if kw.arg is None or not _is_literal(kw.value):
            return ""
        if kw.arg == "device":
            device = ast.literal_eval(kw.value) is True
    return "device" if device else "kernel"


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _free_names(fn: ast.FunctionDef) -> dict[str, int]:
    """Names a function reads that it does not bind itself (first line of each)."""
    local = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            local.add(sub.id)
    free: dict[str, int] = {}
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in local:
            free.setdefault(sub.id, sub.lineno)
    return free


def _check_def(fn: ast.FunctionDef, what: str, mod: _Module) -> None:
    where = f"{what} ({mod.where(fn.lineno)})"
    a = fn.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        raise KernelSourceError(
            f"{where} takes *args, **kwargs or keyword-only arguments; a "
            "kernel takes plain positional arguments"
        )
    if a.defaults or a.kw_defaults:
        raise KernelSourceError(
            f"{where} has default argument values; pass every argument "
            "explicitly (kernels have no defaults)"
        )
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Attribute) and sub.attr.startswith("__"):
            raise KernelSourceError(
                f"{where} uses the attribute {sub.attr!r} ({mod.where(sub.lineno)}); "
                "kernels use numbers, arrays and math only"
            )
        if sub is not fn and isinstance(
            sub,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Lambda,
                ast.Global,
                ast.Nonlocal,
                ast.Import,
                ast.ImportFrom,
            ),
        ):
            raise KernelSourceError(
                f"{where} defines a function, class or import inside its body "
                f"({mod.where(sub.lineno)}); move device code to a top-level "
                "@cuda.jit(device=True) function"
            )
    lines = mod.bindings.get(fn.name, [])
    if len(lines) != 1:
        others = "; ".join(mod.where(abs(x)) for x in lines if x != fn.lineno)
        raise KernelSourceError(
            f"{where}: the name {fn.name} is also bound at {others}; "
            "define the graded kernel once, as a plain decorated function"
        )


def _constant_value(name: str, mod: _Module, seen: tuple[str, ...] = ()) -> Any:
    if name in mod.values:  # each constant once: a chain of doublings stays linear
        return mod.values[name]
    if name in seen:
        raise KernelSourceError(f"the constant {name} is defined in terms of itself")
    lines = mod.bindings.get(name, [])
    node = mod.constants.get(name)
    if node is None or len(lines) != 1:
        raise KernelSourceError(
            f"{name} is bound {len(lines)} times in {mod.filename}; a "
            "constant a kernel reads is assigned once, at the top level"
        )
    mod.values[name] = _evaluate(node, mod, (*seen, name), name)
    return mod.values[name]


def _evaluate(node: ast.expr, mod: _Module, seen: tuple[str, ...], name: str) -> Any:
    bad = KernelSourceError(
        f"the constant {name} ({mod.where(node.lineno)}) is not a number, a tuple "
        "of numbers or arithmetic on other such constants; a kernel can read only those"
    )
    if isinstance(node, ast.Constant):
        if type(node.value) in (int, float, bool):
            return node.value
        raise bad
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e, mod, seen, name) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand, mod, seen, name)
        if isinstance(value, tuple):
            raise bad
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _evaluate(node.left, mod, seen, name)
        right = _evaluate(node.right, mod, seen, name)
        if isinstance(left, tuple) or isinstance(right, tuple):
            raise bad
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise bad
        if isinstance(node.op, ast.LShift) and not 0 <= right <= 62:
            raise bad
        try:
            value = _BINOPS[type(node.op)](left, right)
        except (ArithmeticError, ValueError):
            raise bad from None
        if isinstance(value, int) and abs(value) > MAX_CONSTANT_INT:
            raise bad
        if isinstance(value, float) and not math.isfinite(value):
            raise bad
        return value
    if isinstance(node, ast.Name):
        return _constant_value(node.id, mod, seen)
    raise bad


def extract(
    source: str,
    name: str,
    filename: str = "the notebook",
    where: Callable[[int], str] | None = None,
) -> KernelSource:
    """The kernel `name` of the graded cells `source`, self-contained; raises KernelSourceError.

    `where` says a line of `source` as the student's own (default: ``line N of filename``)."""
    try:
        return _extract(source, name, filename, where or (lambda n: f"line {n} of {filename}"))
    except RecursionError:  # a constant or an expression nested past the interpreter's limit
        raise KernelSourceError(
            f"{name} in {filename} is nested too deeply for the grader to read (a constant "
            "defined through a long chain of others, or a very long expression)"
        ) from None


def _extract(source: str, name: str, filename: str, where: Callable[[int], str]) -> KernelSource:
    mod = _scan(source, filename, where)
    fn = mod.defs.get(name)
    if fn is None:
        raise KernelSourceError(
            f"{filename} has no top-level `def {name}(...)`; the graded kernel must be a function "
            "decorated with @cuda.jit (not an object or a name assigned some other way)"
        )
    if _jit_kind(fn, mod) != "kernel":
        raise KernelSourceError(
            f"{name} ({mod.where(fn.lineno)}) must be decorated with exactly @cuda.jit "
            "(from numba import cuda), nothing else"
        )
    if is_stub_body(fn):
        raise KernelSourceError(still_stub(name))
    order: list[str] = []
    constants: dict[str, Any] = {}
    imports: dict[str, str] = {}
    _collect(fn, f"the kernel {name}", mod, order, constants, imports)
    lines = [imports[k] for k in sorted(imports)]
    lines += [f"{k} = {constants[k]!r}" for k in sorted(constants)]
    line_map: dict[int, int] = {}
    for fname in [*order, name]:
        clean = copy.copy(mod.defs[fname])
        clean.decorator_list = []
        clean.returns = None
        clean.args = ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=a.arg) for a in clean.args.args],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        chunk = ast.unparse(ast.fix_missing_locations(clean))
        first = sum(part.count("\n") + 2 for part in lines) + 1  # parts are joined by a blank line
        _map_lines(clean, chunk, first, line_map)
        lines.append(chunk)
    return KernelSource(
        name=name,
        text="\n\n".join(lines) + "\n",
        device_functions=tuple(order),
        constants=tuple(sorted(constants)),
        lines=tuple(sorted(line_map.items())),
    )


def _map_lines(clean: ast.FunctionDef, chunk: str, first: int, found: dict[int, int]) -> None:
    """Each line of `chunk` (the unparsed `clean`, starting at line `first` of the text) mapped
    to the line of the graded source its statement came from: the two trees have the same shape,
    walked side by side."""
    (reparsed,) = ast.parse(chunk).body
    for original, printed in zip(ast.walk(clean), ast.walk(reparsed), strict=False):
        if type(original) is not type(printed):
            return  # not the same shape after all: the lines found so far are right
        if isinstance(original, ast.stmt) and isinstance(printed, ast.stmt):
            found.setdefault(printed.lineno + first - 1, original.lineno)


def _collect(
    fn: ast.FunctionDef,
    what: str,
    mod: _Module,
    order: list[str],
    constants: dict[str, Any],
    imports: dict[str, str],
    visiting: tuple[str, ...] = (),
) -> None:
    """Check `fn` and gather what it needs; device functions land in `order`, callees first."""
    _check_def(fn, what, mod)
    visiting = (*visiting, fn.name)
    for ref, line in sorted(_free_names(fn).items(), key=lambda x: x[1]):
        if ref in imports or ref in constants or ref in order:
            continue
        if ref in visiting:
            raise KernelSourceError(
                f"{what} calls {ref} recursively ({mod.where(line)}); CUDA device code cannot "
                "recurse"
            )
        if ref in mod.imports:
            stmt = mod.imports[ref]
            if _import_module(stmt) not in ALLOWED_MODULES or len(mod.bindings.get(ref, [])) != 1:
                raise KernelSourceError(
                    f"{what} uses {ref} ({mod.where(line)}), imported by `{stmt}`; a kernel may "
                    "use only cuda, numba, math and numpy"
                )
            imports[ref] = stmt
        elif ref in mod.defs:
            dep = mod.defs[ref]
            if _jit_kind(dep, mod) != "device":
                raise KernelSourceError(
                    f"{what} calls {ref} ({mod.where(line)}), which is not decorated with "
                    "@cuda.jit(device=True); only device functions run inside a kernel"
                )
            if is_stub_body(dep):
                raise KernelSourceError(still_stub(ref))
            _collect(dep, f"the device function {ref}", mod, order, constants, imports, visiting)
            order.append(ref)
        elif ref in mod.constants:
            constants[ref] = _constant_value(ref, mod)
        elif ref in ALLOWED_BUILTINS and ref not in mod.bindings:
            continue
        else:
            raise KernelSourceError(
                f"{what} uses {ref} ({mod.where(line)}), which is not one of its arguments, a "
                "module-level constant, a @cuda.jit(device=True) function or cuda / numba / "
                "math / numpy; a kernel can use only those"
            )


def is_stub(source: str, function: str) -> bool:
    """Whether top-level `def function` is still the release's stub (the one bounded parse)."""
    try:
        tree = bounded_parse.parse(source)
    except (SyntaxError, bounded_parse.SourceTooLarge):
        return False
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    return fn is not None and is_stub_body(fn)


def launches(source: str, function: str, kernel: str) -> bool:
    """Whether top-level `def function` contains a launch ``kernel[grid, block](...)``."""
    try:
        tree = bounded_parse.parse(source)
    except (SyntaxError, bounded_parse.SourceTooLarge):
        return False
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if fn is None:
        return False
    return any(
        isinstance(sub, ast.Call)
        and isinstance(sub.func, ast.Subscript)
        and isinstance(sub.func.value, ast.Name)
        and sub.func.value.id == kernel
        for sub in ast.walk(fn)
    )


_SCALAR_TYPES = {bool: "boolean", int: "int64", float: "float64", complex: "complex128"}


def numba_type(value: Any) -> str:
    """Numba's name for the type of one launch argument (as the grader passes it)."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise KernelSourceError("a 0-d array is not a kernel argument; pass a number")
        dt = "boolean" if value.dtype == np.bool_ else value.dtype.name
        return f"{dt}[{', '.join([':'] * value.ndim)}]"
    if type(value) in _SCALAR_TYPES:
        return _SCALAR_TYPES[type(value)]
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return "boolean" if value.dtype == np.bool_ else value.dtype.name
    raise KernelSourceError(f"a {type(value).__name__} is not a kernel argument")


def signature(args: list | tuple) -> str:
    """The signature string a launch with these arguments compiles for."""
    return f"void({', '.join(numba_type(a) for a in args)})"
