"""A graded kernel as source: what the grader compiles and launches instead of the live object.

Code in the student's process can patch anything there and an object can pretend to be a
dispatcher, so the trusted process never asks that process to launch, compile or time a kernel.
It reads the graded cells with `ast` (nothing is executed here) and extracts, for one kernel:

* the top-level ``def`` decorated with exactly ``@cuda.jit`` (or ``@cuda.jit(...)`` with literal
  arguments only, which are ignored: the grader compiles for its own signatures);
* the ``@cuda.jit(device=True)`` functions it calls, transitively, extracted by the same rules;
* the module-level constants it reads (numbers, tuples of numbers and arithmetic on them, bound
  by plain, chained, annotated or tuple assignment, and bound again only with the same value),
  whose values the grader computes itself and writes back as literals;
* the imports of ``cuda``, ``numba``, ``math`` and ``numpy`` it names.

Inside a kernel, anything Numba's CUDA target compiles is taken as written: the builtins it
supports in device code (`ALLOWED_BUILTINS`), functions and lambdas defined inside the kernel
(their own scope read as Python reads it). Anything else a kernel refers to (another global, a
builtin Numba does not compile for a GPU, a dunder attribute, a default argument, a class,
import or ``global`` inside a kernel, a constant bound with different values or some other way)
is refused with a `KernelSourceError` naming every line involved and what to change: the rules
the gpu_fundamentals notebook states before its first kernel. The result, `KernelSource.text`,
is a module whose execution runs only imports, literal assignments and ``def`` statements: no
student code runs until the grader's own ``cuda.jit`` has compiled it
(`grader.sandbox.harness.KernelHost`).
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
# Builtins numba's CUDA target compiles in device code (`cuda.compile_ptx` accepts each; the
# exceptions for `raise`); every other builtin name in a kernel is refused. `type`, `getattr`,
# `isinstance`, `sum`, `any`, `str`... are not here: Numba's CUDA target does not compile them.
ALLOWED_BUILTINS = frozenset(
    {
        "abs",
        "bool",
        "complex",
        "divmod",
        "enumerate",
        "float",
        "int",
        "iter",
        "len",
        "max",
        "min",
        "next",
        "pow",
        "print",
        "range",
        "round",
        "slice",
        "zip",
        "True",
        "False",
        "None",
        "AssertionError",
        "IndexError",
        "RuntimeError",
        "ValueError",
        "ZeroDivisionError",
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

    def params(self) -> tuple[str, ...]:
        """The kernel's parameter names, in order (as the student wrote them)."""
        fn = next(
            n
            for n in ast.parse(self.text).body
            if isinstance(n, ast.FunctionDef) and n.name == self.name
        )
        return tuple(a.arg for a in fn.args.args)

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


@dataclass(frozen=True)
class _Binding:
    """One top-level assignment of a constant: the value is `expr`'s, indexed by `path` (a name
    inside a tuple target: ``R, (P, Q) = 4, (1, 2)`` binds Q at path (1, 1))."""

    line: int
    expr: ast.expr
    path: tuple[int, ...] = ()


@dataclass
class _Module:
    defs: dict[str, ast.FunctionDef]
    constants: dict[str, list[_Binding]]
    imports: dict[str, str]  # bound name -> the import statement that binds it
    bindings: dict[str, list[int]]  # every top-level binding of a name: its lines
    filename: str
    # a top-level def written 2+ times with the same code (decorators included): how many times
    redefined: dict[str, int] = field(default_factory=dict)
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
            before = mod.defs.get(node.name)
            if before is not None and _same_code(before, node):
                mod.redefined[node.name] = mod.redefined.get(node.name, 1) + 1
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
    if not top:
        return
    if isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None and node.simple:
        targets, value = [node.target], node.value
    else:
        return
    for target in targets:
        for name, path in _target_names(target):
            mod.constants.setdefault(name, []).append(_Binding(node.lineno, value, path))


def _target_names(target: ast.expr, path: tuple[int, ...] = ()) -> list[tuple[str, tuple]]:
    """The names an assignment target binds, each with its index path into the value (only
    plain names and tuples of them: a starred, subscripted or attribute target binds none)."""
    if isinstance(target, ast.Name):
        return [(target.id, path)]
    if isinstance(target, (ast.Tuple, ast.List)) and not any(
        isinstance(e, ast.Starred) for e in target.elts
    ):
        found = []
        for i, e in enumerate(target.elts):
            found += _target_names(e, (*path, i))
        return found
    return []


def _same_code(a: ast.FunctionDef, b: ast.FunctionDef) -> bool:
    """Whether two defs are the same code (their lines aside)."""
    return ast.dump(a, include_attributes=False) == ast.dump(b, include_attributes=False)


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


_NESTED = (ast.FunctionDef, ast.Lambda)


def _own_nodes(fn: ast.FunctionDef | ast.Lambda) -> list[ast.AST]:
    """The nodes of `fn`'s own scope: a function or lambda inside it is one node here (its name
    is bound in this scope, its body is a scope of its own)."""
    todo: list[ast.AST] = list(fn.body) if isinstance(fn, ast.FunctionDef) else [fn.body]
    found = []
    while todo:
        node = todo.pop()
        found.append(node)
        if not isinstance(node, _NESTED):
            todo.extend(ast.iter_child_nodes(node))
    return found


def _free_names(fn: ast.FunctionDef | ast.Lambda, outer: frozenset[str] = frozenset()) -> dict:
    """Names a function reads that neither it nor an enclosing function (`outer`) binds, as
    Python scopes them: name -> the first line that reads it."""
    a = fn.args
    local = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    nodes = _own_nodes(fn)
    for sub in nodes:
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            local.add(sub.id)
        elif isinstance(sub, ast.FunctionDef):
            local.add(sub.name)
    bound = outer | local
    free: dict[str, int] = {}

    def read(name: str, line: int) -> None:
        free[name] = min(line, free.get(name, line))

    for sub in nodes:
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in bound:
            read(sub.id, sub.lineno)
        elif isinstance(sub, _NESTED):
            for name, line in _free_names(sub, bound).items():
                read(name, line)
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
        if isinstance(
            sub,
            (
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Global,
                ast.Nonlocal,
                ast.Import,
                ast.ImportFrom,
            ),
        ):
            raise KernelSourceError(
                f"{where} defines a class, an import, a global or an async function inside its "
                f"body ({mod.where(sub.lineno)}); a kernel uses numbers, arrays, math and "
                "functions (top-level @cuda.jit(device=True) ones, or plain ones inside it)"
            )
        if sub is not fn and isinstance(sub, _NESTED) and _decorated_or_defaulted(sub):
            raise KernelSourceError(
                f"{where} defines a function or lambda with a decorator, default values or "
                f"annotations inside its body ({mod.where(sub.lineno)}); inside a kernel a "
                "function takes plain arguments (or make it a top-level "
                "@cuda.jit(device=True) function)"
            )
    lines = mod.bindings.get(fn.name, [])
    same = mod.redefined.get(fn.name, 1)  # the same def again (a cell run twice) is one def
    if len(lines) != same:
        others = _lines(sorted({abs(x) for x in lines} - {fn.lineno}), mod)
        raise KernelSourceError(
            f"{where}: the name {fn.name} is also bound at {others}; define a kernel or device "
            "function once (or each time the same), as a plain decorated function"
        )


def _decorated_or_defaulted(fn: ast.FunctionDef | ast.Lambda) -> bool:
    a = fn.args
    annotated = any(x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs))
    if isinstance(fn, ast.FunctionDef) and (fn.decorator_list or fn.returns):
        return True
    return bool(a.defaults or a.kw_defaults or a.vararg or a.kwarg or annotated)


def _constant_value(name: str, mod: _Module, seen: tuple[str, ...] = ()) -> Any:
    if name in mod.values:  # each constant once: a chain of doublings stays linear
        return mod.values[name]
    if name in seen:
        raise KernelSourceError(f"the constant {name} is defined in terms of itself")
    lines = sorted(abs(x) for x in mod.bindings.get(name, []))
    found = mod.constants.get(name, [])
    at = _lines(lines, mod)
    if not found or len(found) != len(lines):
        assigned = {b.line for b in found}
        other = _lines([x for x in lines if x not in assigned], mod)
        raise KernelSourceError(
            f"{name} is bound {len(lines)} time{'s' * (len(lines) != 1)} in {mod.filename}, at "
            f"{at}; a constant a kernel reads is bound only by top-level assignments of a "
            f"number or a tuple of numbers (not at {other})"
        )
    values = [_bound_value(b, mod, (*seen, name), name) for b in found]
    if len({repr(v) for v in values}) != 1:
        shown = " and ".join(sorted({repr(v) for v in values}))
        raise KernelSourceError(
            f"{name} is bound {len(lines)} times, at {at}, with different values ({shown}); "
            "a constant a kernel reads has one value: assign it once, or the same value each time"
        )
    mod.values[name] = values[0]
    return values[0]


def _lines(lines: list[int], mod: _Module) -> str:
    """Lines as the student's file names them: ``line 3 of f.py and line 9 of f.py``."""
    said = [mod.where(x) for x in lines]
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else "".join(said)


def _bound_value(b: _Binding, mod: _Module, seen: tuple[str, ...], name: str) -> Any:
    """The value one binding gives its name: the expression's, unpacked along its path."""
    expr, path = b.expr, b.path
    while (  # `R, P = 4, TILE // 4`: P's own expression, so R never reads what P does
        path
        and isinstance(expr, (ast.Tuple, ast.List))
        and not any(isinstance(e, ast.Starred) for e in expr.elts)
        and path[0] < len(expr.elts)
    ):
        expr, path = expr.elts[path[0]], path[1:]
    if isinstance(expr, ast.List):
        raise KernelSourceError(
            f"the constant {name} ({mod.where(b.line)}) is a list; write a tuple, (1, 2)"
        )
    value = _evaluate(expr, mod, seen, name)
    for i in path:
        if not (isinstance(value, tuple) and i < len(value)):
            raise KernelSourceError(
                f"the constant {name} ({mod.where(b.line)}) is unpacked from a value that is not "
                "a tuple of that many numbers"
            )
        value = value[i]
    return value


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
