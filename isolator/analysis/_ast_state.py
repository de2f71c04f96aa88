"""Find module-level mutable state and each code object's reads and writes of it, from
source text alone (the analysed code is never imported).

Two passes over the AST: ``_Binder`` builds the scopes (what each one binds, declares
``global``/``nonlocal`` and imports, with CPython's qualnames and first lines), then
``_Recorder`` resolves every load and store to a state site and records it against the
code object that executes it.  Sites that turn out not to be state (a module constant, a
local class's method) are filtered out at the end against the declarations and the writes
actually seen.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

from isolator.analysis._model import (
    CodeAccess,
    FrozenMap,
    ModuleState,
    StateDecl,
    sites_overlap,
)
from isolator.analysis._model import split_site_path as _split_site_path

# PEP 709: list/set/dict comprehensions have no code object of their own from 3.12 on.
_INLINED_COMPREHENSIONS: Final = sys.version_info >= (3, 12)
_BUILTINS: Final = frozenset(dir(builtins))
_STDLIB: Final = frozenset(sys.stdlib_module_names)

# Methods that change the container they are called on.
_MUTATORS: Final = frozenset(
    {
        "append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
        "add", "discard", "popitem", "sort", "reverse", "appendleft", "extendleft",
        "popleft", "rotate", "difference_update", "intersection_update",
        "symmetric_difference_update", "move_to_end", "subtract", "__setitem__",
        "__delitem__", "__iadd__", "__ior__", "cache_clear",
    }
)  # fmt: skip
# Mutators whose result or success depends on the old contents.
_READING_MUTATORS: Final = frozenset({"pop", "popitem", "setdefault", "remove", "popleft"})
_CLEARING: Final = frozenset({"clear", "cache_clear"})
# Mutators and readers whose first argument is a key: the site can be one item.
_KEYED_MUTATORS: Final = frozenset({"setdefault", "pop", "__setitem__", "__delitem__"})
_KEYED_READERS: Final = frozenset({"get", "__getitem__", "__contains__"})

# Callables that return a fresh mutable object, by (module, name); builtins by name.
_MUTABLE_BUILTINS: Final = frozenset({"dict", "list", "set", "bytearray", "sorted"})
_MUTABLE_FACTORIES: Final = frozenset(
    {
        ("collections", "defaultdict"), ("collections", "OrderedDict"),
        ("collections", "Counter"), ("collections", "deque"), ("collections", "ChainMap"),
        ("collections", "UserDict"), ("collections", "UserList"),
        ("weakref", "WeakValueDictionary"), ("weakref", "WeakKeyDictionary"),
        ("weakref", "WeakSet"), ("types", "SimpleNamespace"), ("argparse", "Namespace"),
        ("array", "array"), ("queue", "Queue"), ("queue", "LifoQueue"),
        ("queue", "PriorityQueue"), ("queue", "SimpleQueue"), ("itertools", "count"),
        ("itertools", "cycle"), ("threading", "local"), ("copy", "copy"),
        ("copy", "deepcopy"), ("unittest.mock", "Mock"), ("unittest.mock", "MagicMock"),
        ("unittest.mock", "AsyncMock"), ("unittest.mock", "NonCallableMock"),
    }
)  # fmt: skip
_MUTABLE_LITERALS: Final = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_MEMO_NAMES: Final = frozenset(
    {"lru_cache", "cache", "memoize", "memoized", "reify", "ttl_cache", "lfu_cache"}
)
# Module-level names that hold configuration for tools, not program state.
_IGNORED_GLOBALS: Final = frozenset(
    {"pytestmark", "pytest_plugins", "collect_ignore", "collect_ignore_glob"}
)
_IMPLICIT_CLASSMETHODS: Final = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})
_MAX_ALIAS_DEPTH: Final = 4


class _Ref(NamedTuple):
    """A resolved reference: ``module:path``; ``kind`` says what the path names."""

    module: str
    path: str  # "" for a module object; the class path for kind "inst"
    kind: str = "obj"  # "obj" | "module" | "class" | "func" | "inst"
    exact: bool = True  # False once a non-constant subscript was crossed
    via_self: bool = False  # reached through ``self.attr``: a class attribute or an instance's

    def key(self, key: str) -> _Ref:
        return self._replace(path=f"{self.path}[{key}]") if self.exact else self

    def site(self) -> str:
        return f"{self.module}:{self.path}"


class Extra(NamedTuple):
    """Per-module data for linking modules, kept beside the ModuleState in the cache."""

    dropped: list[list[str]]  # per code object: local reads not (yet) known to be state
    lines: dict[str, int]  # module-level names and class attributes -> first binding line
    cacheable: bool = True  # False when the file could not be read (may work next time)


_NO_EXTRA: Final = Extra([], {})


class _Import(NamedTuple):
    module: str
    attr: str | None  # None: the name is bound to the module object itself


class _Code:
    """Accumulates one code object's accesses."""

    __slots__ = ("qualname", "firstlineno", "reads", "writes", "cleared", "set_or_added")

    def __init__(self, qualname: str, firstlineno: int) -> None:
        self.qualname = qualname
        self.firstlineno = firstlineno
        self.reads: dict[str, int] = {}
        self.writes: dict[str, int] = {}
        # Sites this code empties (``.clear()``, ``.cache_clear()``) and sites it writes
        # any other way: a site only emptied here is invalidated, not filled or set.
        self.cleared: set[str] = set()
        self.set_or_added: set[str] = set()


class _Scope:
    """One Python scope and what it binds."""

    __slots__ = (
        "kind", "name", "qualname", "parent", "code", "bound", "globals", "nonlocals",
        "imports", "loads", "values", "defs", "classdefs", "cls_path", "func_path",
        "self_param", "cls_param", "default_sites", "private",
    )  # fmt: skip

    def __init__(self, kind: str, name: str, qualname: str, parent: _Scope | None) -> None:
        self.kind = kind  # module | class | function | lambda | comprehension
        self.name = name
        self.qualname = qualname
        self.parent = parent
        self.code: _Code | None = None
        self.bound: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.imports: dict[str, _Import] = {}
        self.loads: set[str] = set()  # names used as values, not only called
        # name -> [(assigned value or None for other bindings, line)]
        self.values: dict[str, list[tuple[ast.expr | None, int]]] = {}
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classdefs: dict[str, ast.ClassDef] = {}
        self.cls_path: str | None = None  # dotted path of a class that lives as long as the module
        self.func_path: str | None = None  # path of a function that lives as long as the module
        self.self_param: str | None = None
        self.cls_param: str | None = None
        self.default_sites: dict[str, str] = {}  # parameter -> site path of its mutable default
        self.private: str | None = None  # class name used for private name mangling

    def bind(self, name: str, value: ast.expr | None, line: int) -> None:
        self.bound.add(name)
        self.values.setdefault(name, []).append((value, line))


def _const_key(node: ast.expr) -> str | None:
    """``repr`` of a constant subscript key, or None if the key is computed."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, type(...)):
        return repr(node.value)
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, (int, float))
    ):
        return repr(-node.operand.value)
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
        return repr(tuple(e.value for e in node.elts if isinstance(e, ast.Constant)))
    return None


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    """``co_firstlineno`` of a def or class: the line of its first decorator (CPython 3.8+)."""
    if node.decorator_list:
        return node.decorator_list[0].lineno
    return node.lineno


def _is_globals_call(node: ast.expr) -> bool:
    """``globals()``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "globals"
        and not node.args
        and not node.keywords
    )


def _terminal_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_memo_decorator(node: ast.expr) -> bool:
    name = _terminal_name(node)
    if name is None:
        return False
    return (
        name in _MEMO_NAMES
        or name.endswith("_cache")
        or name.startswith(("cached", "memo"))
        or name.endswith("_memoize")
    )


def _assigned(scope: _Scope, name: str) -> bool:
    """True if ``name`` is bound by an assignment, not only by def/class/import (an
    ``except ImportError: X = None`` fallback does not count)."""
    return any(
        v is not None and not (isinstance(v, ast.Constant) and v.value is None)
        for v, _ in scope.values.get(name, ())
    )


def _is_capword(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


# Fields that never hold nodes we care about (expression contexts, operators).
_SKIP_FIELDS: Final = frozenset({"ctx", "op", "ops", "type_comment", "type_ignores"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def _own_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[ast.AST]:
    """The nodes of a function's body, not those of the functions, lambdas and classes
    defined in it (their code runs when they are called)."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _filled_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The parameters whose container the function changes (an item stored or deleted, a
    mutating method called) and never rebinds: a helper handed the cache to fill."""
    a = fn.args
    params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    filled: set[str] = set()
    rebound: set[str] = set()
    for node in _own_nodes(fn):
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            target = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            target = node.func.value
        else:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                rebound.add(node.id)
            continue
        if isinstance(target, ast.Name) and target.id in params:
            filled.add(target.id)
    return frozenset(filled - rebound)


def _child_fields(cls: type[ast.AST]) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f not in _SKIP_FIELDS)
    return fields


class _Visitor:
    """A leaner ``ast.NodeVisitor``: dispatch cached per node type, leaf fields skipped
    (the stdlib one spends most of its time in ``getattr`` and ``visit_Constant``)."""

    def __init__(self) -> None:
        self._methods: dict[type[ast.AST], Callable[[Any], None]] = {}

    def visit(self, node: ast.AST) -> None:
        cls = type(node)
        meth = self._methods.get(cls)
        if meth is None:
            name = "visit_" + cls.__name__
            found: Callable[[Any], None] = getattr(self, name, self.generic_visit)
            meth = self._methods[cls] = found
        meth(node)

    def generic_visit(self, node: ast.AST) -> None:
        for name in _child_fields(type(node)):
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_Constant(self, node: ast.Constant) -> None:
        pass


class _Binder(_Visitor):
    """Pass 1: scopes, bindings, qualnames and code objects."""

    def __init__(self, an: _Analyzer) -> None:
        super().__init__()
        self.an = an
        self.scope = an.module_scope

    # -- scopes -------------------------------------------------------------------------
    def _child_qualname(self, name: str, force_global_ok: bool) -> str:
        parent = self.scope
        # CPython names a child by the nearest enclosing scope that has its own code object.
        while parent.code is None and parent.parent is not None:
            parent = parent.parent
        if parent.kind == "module":
            return name
        if force_global_ok and name in parent.globals:
            return name
        if parent.kind in ("function", "lambda"):
            return f"{parent.qualname}.<locals>.{name}"
        return f"{parent.qualname}.{name}"

    def _new_scope(
        self, node: ast.AST, kind: str, name: str, firstlineno: int, own_code: bool = True
    ) -> _Scope:
        qualname = self._child_qualname(name, kind in ("function", "class"))
        scope = _Scope(kind, name, qualname, self.scope)
        if own_code:
            scope.code = self.an.new_code(qualname, firstlineno)
        scope.private = name if kind == "class" else self.scope.private
        self.an.scopes[node] = scope
        return scope

    def _visit_in(self, scope: _Scope, nodes: Iterable[ast.AST]) -> None:
        saved, self.scope = self.scope, scope
        for n in nodes:
            self.visit(n)
        self.scope = saved

    def _visit_defaults(self, args: ast.arguments) -> None:
        for d in args.defaults:
            self.visit(d)
        for d2 in args.kw_defaults:
            if d2 is not None:
                self.visit(d2)

    def _bind_params(self, scope: _Scope, args: ast.arguments) -> None:
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            scope.bind(a.arg, None, a.lineno)
        for va in (args.vararg, args.kwarg):
            if va is not None:
                scope.bind(va.arg, None, va.lineno)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.scope
        for d in node.decorator_list:
            self.visit(d)
        self._visit_defaults(node.args)
        outer.bind(node.name, None, node.lineno)
        outer.defs[node.name] = node
        scope = self._new_scope(node, "function", node.name, _first_line(node))
        self._bind_params(scope, node.args)
        if outer.kind == "module" or (outer.kind == "class" and outer.cls_path is not None):
            scope.func_path = scope.qualname
        if outer.kind == "class":
            positional = [*node.args.posonlyargs, *node.args.args]
            deco = {_terminal_name(d) for d in node.decorator_list}
            if positional and "staticmethod" not in deco:
                if "classmethod" in deco or node.name in _IMPLICIT_CLASSMETHODS:
                    scope.cls_param = positional[0].arg
                else:
                    scope.self_param = positional[0].arg
        self._visit_in(scope, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_defaults(node.args)
        scope = self._new_scope(node, "lambda", "<lambda>", node.lineno)
        self._bind_params(scope, node.args)
        self._visit_in(scope, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self.scope
        for d in node.decorator_list:
            self.visit(d)
        for b in node.bases:
            self.visit(b)
        for k in node.keywords:
            self.visit(k.value)
        outer.bind(node.name, None, node.lineno)
        outer.classdefs[node.name] = node
        scope = self._new_scope(node, "class", node.name, _first_line(node))
        if outer.kind == "module":
            scope.cls_path = node.name
        elif outer.kind == "class" and outer.cls_path is not None:
            scope.cls_path = f"{outer.cls_path}.{node.name}"
        if scope.cls_path is not None:
            self.an.class_nodes[scope.cls_path] = (node, scope)
        self._visit_in(scope, node.body)

    def _comprehension(
        self, node: ast.expr, name: str, gens: list[ast.comprehension], elts: list[ast.expr]
    ) -> None:
        # The first iterable is evaluated in the enclosing scope.
        self.visit(gens[0].iter)
        own = name == "<genexpr>" or not _INLINED_COMPREHENSIONS
        scope = self._new_scope(node, "comprehension", name, node.lineno, own_code=own)
        saved, self.scope = self.scope, scope
        for i, gen in enumerate(gens):
            self.visit(gen.target)
            if i:
                self.visit(gen.iter)
            for cond in gen.ifs:
                self.visit(cond)
        for e in elts:
            self.visit(e)
        self.scope = saved

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, "<listcomp>", node.generators, [node.elt])

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node, "<setcomp>", node.generators, [node.elt])

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node, "<genexpr>", node.generators, [node.elt])

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, "<dictcomp>", node.generators, [node.key, node.value])

    # -- bindings -----------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        # ``loads`` records names used as values (returned, passed, stored): calling a
        # nested function does not hand it out, so its name is not recorded.
        if not isinstance(node.func, ast.Name):
            self.visit(node.func)
        for a in node.args:
            self.visit(a)
        for k in node.keywords:
            self.visit(k.value)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.scope.loads.add(node.id)
        else:
            self.scope.bind(node.id, None, node.lineno)

    def _bind_target(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.scope.bind(target.id, value, target.lineno)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values: list[ast.expr] | None = None
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                values = value.elts
            for i, elt in enumerate(target.elts):
                self._bind_target(elt, values[i] if values is not None else None)
        else:
            self.visit(target)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self._bind_target(t, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        # Annotations never hold state; only the value is evaluated for us.
        if node.value is not None:
            self.visit(node.value)
            self._bind_target(node.target, node.value)
        elif not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        scope.bind(node.target.id, node.value, node.lineno)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                bound, target = alias.asname, alias.name
            else:
                bound = target = alias.name.partition(".")[0]
            parts = alias.name.split(".")
            for i in range(1, len(parts) + 1):
                self.an.known_modules.add(".".join(parts[:i]))
            self.scope.bind(bound, None, node.lineno)
            self.scope.imports.setdefault(bound, _Import(target, None))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = self.an.resolve_relative(node.level, node.module)
        if module is None:
            return
        self.an.known_modules.add(module)
        for alias in node.names:
            if alias.name == "*":
                if self.scope.kind == "module":
                    self.an.star_modules.append(module)
                continue
            bound = alias.asname or alias.name
            self.scope.bind(bound, None, node.lineno)
            sub = f"{module}.{alias.name}"
            if sub in self.an.known_modules or self.an.module_exists(sub):
                self.an.known_modules.add(sub)
                self.scope.imports.setdefault(bound, _Import(sub, None))
            else:
                self.scope.imports.setdefault(bound, _Import(module, alias.name))

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals.update(node.names)
        for name in node.names:
            self.an.declared_global.setdefault(name, node.lineno)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.nonlocals.update(node.names)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.scope.bind(node.name, None, node.lineno)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.scope.bind(node.name, None, node.lineno)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.scope.bind(node.name, None, node.lineno)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.scope.bind(node.rest, None, node.lineno)
        self.generic_visit(node)

    def visit_TypeAlias(self, node: ast.AST) -> None:  # Python 3.12+
        name = getattr(node, "name", None)
        value = getattr(node, "value", None)
        if isinstance(name, ast.Name) and isinstance(value, ast.expr):
            self.scope.bind(name.id, None, name.lineno)
            # The value is evaluated lazily, in a scope of its own named like the alias.
            scope = self._new_scope(node, "function", name.id, name.lineno)
            self._visit_in(scope, [value])


class _Recorder(_Visitor):
    """Pass 2: resolve loads and stores to sites and record them per code object."""

    def __init__(self, an: _Analyzer) -> None:
        super().__init__()
        self.an = an
        self.scope = an.module_scope
        self.code: _Code = an.module_code
        self.depth = 0  # local-alias resolution depth

    # -- scopes -------------------------------------------------------------------------
    def _visit_in(self, node: ast.AST, nodes: Iterable[ast.AST]) -> None:
        scope = self.an.scopes.get(node)
        if scope is None:
            return  # not scoped by pass 1 (3.12 type parameters): holds no state
        saved = self.scope, self.code
        self.scope = scope
        if scope.code is not None:
            self.code = scope.code
        for n in nodes:
            self.visit(n)
        self.scope, self.code = saved

    def _visit_defaults(self, args: ast.arguments) -> None:
        for d in args.defaults:
            self.visit(d)
        for d2 in args.kw_defaults:
            if d2 is not None:
                self.visit(d2)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self._visit_defaults(node.args)
        self._store_definition(node.name, node.lineno)
        self._visit_in(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_defaults(node.args)
        self._visit_in(node, [node.body])

    def visit_TypeAlias(self, node: ast.AST) -> None:  # Python 3.12+
        value = getattr(node, "value", None)
        if isinstance(value, ast.expr):
            self._visit_in(node, [value])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        for b in node.bases:
            self.visit(b)
        for k in node.keywords:
            self.visit(k.value)
        self._store_definition(node.name, node.lineno)
        self._visit_in(node, node.body)

    def _comprehension(
        self, node: ast.expr, gens: list[ast.comprehension], elts: list[ast.expr]
    ) -> None:
        self.visit(gens[0].iter)
        scope = self.an.scopes.get(node)
        if scope is None:
            return
        saved = self.scope, self.code
        self.scope = scope
        if scope.code is not None:
            self.code = scope.code
        for i, gen in enumerate(gens):
            self._store(gen.target)
            if i:
                self.visit(gen.iter)
            for cond in gen.ifs:
                self.visit(cond)
        for e in elts:
            self.visit(e)
        self.scope, self.code = saved

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, node.generators, [node.elt])

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node, node.generators, [node.elt])

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node, node.generators, [node.elt])

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, node.generators, [node.key, node.value])

    # -- name resolution ----------------------------------------------------------------
    def _global_refs(self, name: str) -> list[_Ref]:
        an = self.an
        m = an.module_scope
        imp = m.imports.get(name)
        if imp is not None and name not in an.declared_global and not _assigned(m, name):
            if imp.attr is None:
                return [_Ref(imp.module, "", "module")]
            return [_Ref(imp.module, imp.attr)]
        if name in m.bound or name in an.declared_global:
            has_value = _assigned(m, name)
            if name in m.classdefs and not has_value:
                return [_Ref(an.modname, name, "class")]
            if name in m.defs and not has_value:
                return [_Ref(an.modname, name, "func")]
            return [_Ref(an.modname, name)]
        if name in _BUILTINS:
            return []
        if len(an.star_modules) == 1:
            return [_Ref(an.star_modules[0], name)]
        return [_Ref(an.modname, name)]

    def _alias_refs(self, imp: _Import) -> list[_Ref]:
        if imp.attr is None:
            return [_Ref(imp.module, "", "module")]
        return [_Ref(imp.module, imp.attr)]

    def _outer_refs(self, name: str, scope: _Scope | None, inner: _Scope) -> list[_Ref]:
        """Resolve a free name of ``inner`` through the enclosing scopes."""
        child = inner
        p = scope
        while p is not None:
            if p.kind == "class":
                child, p = p, p.parent
                continue
            if p.kind == "module" or name in p.globals:
                return self._global_refs(name)
            if name in p.bound and name not in p.nonlocals:
                if name in p.imports:
                    return self._alias_refs(p.imports[name])
                self.an.cell_uses.setdefault((p, name), set()).add(child)
                kind = "func" if name in p.defs or name in p.classdefs else "obj"
                return [_Ref(self.an.modname, f"{p.qualname}.<closure>.{name}", kind)]
            child, p = p, p.parent
        return self._global_refs(name)

    def _name_refs(self, name: str, scope: _Scope) -> list[_Ref]:
        if scope.kind == "module" or name in scope.globals:
            return self._global_refs(name)
        if name in scope.nonlocals:
            return self._outer_refs(name, scope.parent, scope)
        if name not in scope.bound:
            return self._outer_refs(name, scope.parent, scope)
        if name in scope.imports:
            return self._alias_refs(scope.imports[name])
        an = self.an
        if scope.kind == "class":
            if scope.cls_path is None:
                return []
            return [_Ref(an.modname, f"{scope.cls_path}.{an.mangle(name, scope)}")]
        if name == scope.self_param or name == scope.cls_param:
            cls_scope = scope.parent
            if cls_scope is None or cls_scope.cls_path is None:
                return []
            if name == scope.cls_param:
                return [_Ref(an.modname, cls_scope.cls_path, "class")]
            refs = [_Ref(an.modname, cls_scope.cls_path, "inst")]
            refs.extend(_Ref(an.modname, s) for s in an.singletons_of.get(cls_scope.cls_path, ()))
            return refs
        site = scope.default_sites.get(name)
        if site is not None:
            return [_Ref(an.modname, site)]
        values = scope.values.get(name, ())
        if len(values) == 1 and values[0][0] is not None and self.depth < _MAX_ALIAS_DEPTH:
            # A local bound once to a chain is an alias: ``s = SETTINGS; s['k'] = v``.
            saved, self.scope = self.scope, scope
            self.depth += 1
            try:
                refs, _ = self._chain(values[0][0], alias=True)
            finally:
                self.depth -= 1
                self.scope = saved
            return refs
        return []

    def _extend_attr(self, r: _Ref, attr: str, store: bool = False) -> _Ref | None:
        an = self.an
        attr = an.mangle(attr, self.scope)
        if r.kind == "module":
            sub = f"{r.module}.{attr}"
            if sub in an.known_modules or an.module_exists(sub):
                return _Ref(sub, "", "module")
            return _Ref(r.module, attr)
        if not r.exact:
            return r
        if r.kind == "inst" or r.kind == "class":
            owner = r.path if store else an.owner_class(r.path, attr)
            path = f"{owner}.{attr}"
            if path in an.class_nodes:
                return _Ref(r.module, path, "class")
            return _Ref(r.module, path, "obj", via_self=r.kind == "inst")
        return r._replace(path=f"{r.path}.{attr}", kind="obj")

    def _chain(self, e: ast.expr, alias: bool = False) -> tuple[list[_Ref], list[ast.expr]]:
        """Resolve a Name/Attribute/Subscript chain; also return the sub-expressions that
        were not consumed and still need visiting."""
        if isinstance(e, ast.Name):
            return self._name_refs(e.id, self.scope), []
        if isinstance(e, ast.Attribute):
            refs, rest = self._chain(e.value, alias)
            if e.attr == "__class__":
                return [r._replace(kind="class") for r in refs if r.kind == "inst"], rest
            out = []
            for r in refs:
                x = self._extend_attr(r, e.attr)
                if x is not None:
                    out.append(x)
            return out, rest
        if isinstance(e, ast.Subscript):
            refs, rest = self._chain(e.value, alias)
            key = _const_key(e.slice)
            if key is not None and key[:1] in "'\"" and any(r.kind == "module" for r in refs):
                # ``globals()['X']``: a module's namespace indexed by a name.
                name = ast.literal_eval(key)
                return [_Ref(r.module, name) for r in refs if r.kind == "module"], rest
            refs = [r for r in refs if r.kind == "obj"]
            if key is None:
                rest.append(e.slice)
                return [r._replace(exact=False) for r in refs], rest
            return [r.key(key) for r in refs], rest
        if isinstance(e, ast.Call):
            f = e.func
            if (
                isinstance(f, ast.Name)
                and f.id in ("type", "getattr", "globals")
                and not e.keywords
                and self._is_builtin(f.id)
            ):
                if f.id == "globals" and not e.args:
                    return [_Ref(self.an.modname, "", "module")], []
                if f.id == "type" and len(e.args) == 1:
                    refs, rest = self._chain(e.args[0], alias)
                    return [r._replace(kind="class") for r in refs if r.kind == "inst"], rest
                if f.id == "getattr" and len(e.args) in (2, 3):
                    name = e.args[1]
                    if isinstance(name, ast.Constant) and isinstance(name.value, str):
                        refs, rest = self._chain(e.args[0], alias)
                        rest.extend(e.args[2:])
                        out = [x for r in refs if (x := self._extend_attr(r, name.value))]
                        return out, rest
            elif (
                isinstance(f, ast.Attribute)
                and (f.attr == "get" or (alias and f.attr == "setdefault"))
                and e.args
                and not e.keywords
            ):
                key = _const_key(e.args[0])
                if key is not None:
                    refs, rest = self._chain(f.value, alias)
                    rest.extend(e.args[1:])
                    return [r.key(key) for r in refs if r.kind == "obj"], rest
        return [], [e]

    def _is_builtin(self, name: str) -> bool:
        return name in _BUILTINS and not self._name_refs(name, self.scope)

    # -- recording ----------------------------------------------------------------------
    def _read(self, r: _Ref, line: int) -> None:
        an = self.an
        if r.kind in ("module", "inst", "class"):
            return
        if r.module != an.modname:
            if r.module.partition(".")[0] in _STDLIB:
                return
        elif r.kind == "func" and r.path not in an.cache_paths:
            return
        self.code.reads.setdefault(r.site(), line)

    def _write(
        self, r: _Ref, line: int, evidence: bool = True, rebind: bool = False, clear: bool = False
    ) -> None:
        an = self.an
        if r.kind in ("module", "inst"):
            return
        site = r.site()
        if r.via_self and r.module == an.modname:
            # Through ``self``, only a mutation of a shared class attribute is module state.
            if not any(sites_overlap(f"{an.modname}:{p}", site) for p in an.shared_attrs):
                return
        writes = self.code.writes
        if site not in writes or writes[site] > line:
            writes[site] = line
        (self.code.cleared if clear else self.code.set_or_added).add(site)
        if evidence and site not in an.evidence:
            an.evidence[site] = line
        if rebind:
            an.rebinds.add(site)

    def _store_name(self, name: str, line: int, scope: _Scope | None = None) -> None:
        an = self.an
        scope = scope or self.scope
        if scope.kind == "module":
            self._write(_Ref(an.modname, name), line, evidence=False, rebind=True)
        elif name in scope.globals:
            an.rebound_globals.setdefault(name, line)
            self._write(_Ref(an.modname, name), line, rebind=True)
        elif name in scope.nonlocals:
            for r in self._outer_refs(name, scope.parent, scope):
                self._write(r._replace(kind="obj"), line, rebind=True)
        elif scope.kind == "class" and scope.cls_path is not None:
            path = f"{scope.cls_path}.{an.mangle(name, scope)}"
            self._write(_Ref(an.modname, path), line, evidence=False, rebind=True)

    def _store_definition(self, name: str, line: int) -> None:
        # A def or class statement defines, it does not change state, unless a function
        # rebinds a global with it.
        if self.scope.kind not in ("module", "class"):
            self._store_name(name, line)

    def _store(self, target: ast.expr) -> None:
        line = target.lineno
        if isinstance(target, ast.Name):
            self._store_name(target.id, line)
        elif isinstance(target, ast.Attribute):
            refs, rest = self._chain(target.value)
            for e in rest:
                self.visit(e)
            for r in refs:
                if r.kind == "inst":
                    continue  # an instance attribute, not shared
                x = self._extend_attr(r, target.attr, store=True)
                if x is not None:
                    # Storing an attribute replaces a binding; it does not mutate a value.
                    self._write(x._replace(via_self=False), line, rebind=True)
        elif isinstance(target, ast.Subscript):
            refs, rest = self._chain(target.value)
            for e in rest:
                self.visit(e)
            key = _const_key(target.slice)
            if key is None:
                self.visit(target.slice)
            for r in refs:
                if r.kind == "obj":
                    self._write(r.key(key) if key is not None else r, line)
                elif r.kind == "module" and key is not None and key[:1] in "'\"":
                    # ``globals()['X'] = v`` rebinds a module global.
                    self._write(_Ref(r.module, ast.literal_eval(key)), line, rebind=True)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._store(elt)
        elif isinstance(target, ast.Starred):
            self._store(target.value)
        else:
            self.visit(target)

    # -- statements ---------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self._store(t)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._store(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._load(node.target)
        self.visit(node.value)
        self._store(node.target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._store(t)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._store(node.target)
        for s in (*node.body, *node.orelse):
            self.visit(s)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._store(node.optional_vars)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        self._store_name(node.target.id, node.lineno, scope)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self._store_name(alias.asname or alias.name.partition(".")[0], node.lineno)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._store_name(node.name, node.lineno)
        for s in node.body:
            self.visit(s)

    # -- expressions --------------------------------------------------------------------
    def _load(self, node: ast.expr) -> None:
        refs, rest = self._chain(node)
        for r in refs:
            self._read(r, node.lineno)
        for e in rest:
            if e is not node:
                self.visit(e)
            else:
                self.generic_visit(e)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            for r in self._name_refs(node.id, self.scope):
                self._read(r, node.lineno)
        else:
            self._store(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self._load(node)
        else:
            self._store(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (
            isinstance(node.ctx, ast.Load)
            and _is_globals_call(node.value)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            self._globals_read(node.slice.value, node.lineno)
            return
        if isinstance(node.ctx, ast.Load):
            self._load(node)
        else:
            self._store(node)

    def _globals_read(self, name: str, line: int) -> None:
        """``"X" in globals()``, ``globals().get("X")``, ``globals()["X"]``: a read of the
        global ``X`` (a lazily built global: ``if "X" not in globals(): global X; ...``)."""
        for r in self._global_refs(name):
            self._read(r, line)

    def visit_Compare(self, node: ast.Compare) -> None:
        # ``'k' in SETTINGS`` reads one key.
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and (key := _const_key(node.left)) is not None
        ):
            if _is_globals_call(node.comparators[0]):
                if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                    self._globals_read(node.left.value, node.lineno)
                return
            refs, rest = self._chain(node.comparators[0])
            if refs:
                for r in refs:
                    self._read(r.key(key) if r.kind == "obj" else r, node.lineno)
                for e in rest:
                    self.visit(e)
                return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self._filled_by_call(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "get"
            and _is_globals_call(func.value)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            self._globals_read(node.args[0].value, node.lineno)
            self._visit_args(node)
            return
        if isinstance(func, ast.Attribute):
            refs, rest = self._chain(func.value)
            if refs:
                self._method_call(refs, func.attr, node)
                for e in rest:
                    self.visit(e)
                self._visit_args(node)
                return
        elif isinstance(func, ast.Name) and self._builtin_call(func.id, node):
            return
        self.generic_visit(node)

    def _filled_by_call(self, node: ast.Call) -> None:
        """A call of a function of this module that fills a container it is handed writes
        what the caller hands it: ``self._add_to_cache(cache=self._regex_cache, ...)``
        writes the class's cache, from the caller (the helper itself writes a parameter,
        which is no site)."""
        found = self._callee(node.func)
        if found is None:
            return
        fn, bound = found
        filled = self.an.filled_params(fn)
        if not filled or any(isinstance(a, ast.Starred) for a in node.args):
            return
        a = fn.args
        positional = [p.arg for p in (*a.posonlyargs, *a.args)][1 if bound else 0 :]
        given = dict(zip(positional, node.args))
        given.update((k.arg, k.value) for k in node.keywords if k.arg is not None)
        for name in filled:
            expr = given.get(name)
            if expr is None:
                continue
            refs, _ = self._chain(expr)
            for r in refs:
                if r.kind == "obj":
                    self._write(r, node.lineno)

    def _callee(self, func: ast.expr) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool] | None:
        """The def a call runs when it is this module's own, and whether the call passes
        the first parameter itself (a method called on ``self`` or ``cls``)."""
        an = self.an
        if isinstance(func, ast.Name):
            for r in self._name_refs(func.id, self.scope):
                if r.module == an.modname and r.path == func.id:
                    fn = an.module_scope.defs.get(func.id)
                    if fn is not None:
                        return fn, False
            return None
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return None
        attr = an.mangle(func.attr, self.scope)
        for r in self._name_refs(func.value.id, self.scope):
            if r.kind not in ("inst", "class") or r.module != an.modname:
                continue
            entry = an.class_nodes.get(an.owner_class(r.path, attr))
            fn = entry[1].defs.get(attr) if entry else None
            if fn is None:
                continue
            deco = {_terminal_name(d) for d in fn.decorator_list}
            if "staticmethod" in deco:
                return fn, False
            if "classmethod" in deco or fn.name in _IMPLICIT_CLASSMETHODS:
                return fn, True
            return fn, r.kind == "inst"
        return None

    def _visit_args(self, node: ast.Call) -> None:
        for a in node.args:
            self.visit(a)
        for k in node.keywords:
            self.visit(k.value)

    def _method_call(self, refs: list[_Ref], meth: str, node: ast.Call) -> None:
        an = self.an
        line = node.lineno
        key = _const_key(node.args[0]) if node.args else None
        for r in refs:
            if r.kind == "module" or r.kind == "inst":
                x = self._extend_attr(r, meth)
                if x is not None:
                    self._read(x, line)
                continue
            if r.kind == "class" or (r.kind == "obj" and r.path in an.singleton_class):
                cls = r.path if r.kind == "class" else an.singleton_class[r.path]
                if an.owner_defines(cls, meth):
                    # The method's own code records what it touches.
                    path = f"{an.owner_class(cls, meth)}.{meth}"
                    if path in an.cache_paths:
                        self._read(_Ref(an.modname, path), line)
                    continue
                if r.kind == "class":
                    x = self._extend_attr(r, meth)
                    if x is not None:
                        self._read(x, line)
                    continue
            if meth in _MUTATORS:
                self._mutate(r, meth, key, node)
                continue
            if meth in _KEYED_READERS and key is not None:
                self._read(r.key(key), line)
                continue
            self._read(r, line)

    def _mutate(self, r: _Ref, meth: str, key: str | None, node: ast.Call) -> None:
        line = node.lineno
        targets = [r]
        if meth in _KEYED_MUTATORS and key is not None:
            first = node.args[0]
            if meth != "pop" or (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                targets = [r.key(key)]
        elif meth == "update" and r.exact:
            keys: list[str] | None = None
            if not node.args and node.keywords and all(k.arg for k in node.keywords):
                keys = [repr(k.arg) for k in node.keywords]
            elif len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Dict):
                d = node.args[0]
                ks = [_const_key(k) if k is not None else None for k in d.keys]
                if ks and all(k is not None for k in ks):
                    keys = [k for k in ks if k is not None]
            if keys:
                targets = [r.key(k) for k in keys]
        for t in targets:
            self._write(t, line, clear=meth in _CLEARING)
            if meth in _READING_MUTATORS:
                self._read(t, line)

    def _builtin_call(self, name: str, node: ast.Call) -> bool:
        if name not in ("setattr", "delattr", "getattr", "hasattr") or not self._is_builtin(name):
            return False
        if len(node.args) < 2 or node.keywords:
            return False
        refs, rest = self._chain(node.args[0])
        attr = node.args[1]
        const = attr.value if isinstance(attr, ast.Constant) else None
        targets: list[_Ref] = []
        for r in refs:
            if r.kind == "inst" and name in ("setattr", "delattr"):
                continue
            if isinstance(const, str):
                x = self._extend_attr(r, const, store=name in ("setattr", "delattr"))
                if x is not None:
                    targets.append(x._replace(via_self=False) if name != "getattr" else x)
            elif r.kind in ("obj", "class"):
                targets.append(r._replace(kind="obj"))
        for t in targets:
            if name in ("setattr", "delattr"):
                self._write(t, node.lineno, rebind=True)
            else:
                self._read(t, node.lineno)
        for e in rest:
            self.visit(e)
        for a in node.args[1:]:
            self.visit(a)
        return True


class _Analyzer:
    """Holds one module's analysis while the two passes run."""

    def __init__(self, tree: ast.Module, modname: str, filename: str) -> None:
        self.tree = tree
        self.modname = modname
        self.filename = filename
        base = os.path.basename(filename)
        self.is_package = base == "__init__.py"
        self.package = modname if self.is_package else modname.rpartition(".")[0]
        self.root = self._project_root()
        self._exists_cache: dict[str, bool] = {}
        self.codes: list[_Code] = []
        self.scopes: dict[ast.AST, _Scope] = {}
        self.module_scope = _Scope("module", "<module>", "<module>", None)
        self.module_code = self.new_code("<module>", 1)
        self.module_scope.code = self.module_code
        self.known_modules: set[str] = {modname}
        self.star_modules: list[str] = []
        self.declared_global: dict[str, int] = {}
        self.class_nodes: dict[str, tuple[ast.ClassDef, _Scope]] = {}
        # Filled between the passes.
        self.decls: dict[tuple[str, str], int] = {}  # (site, kind) -> line
        self.cache_paths: set[str] = set()
        self.shared_attrs: set[str] = set()  # class attribute paths holding shared objects
        self.singleton_class: dict[str, str] = {}  # singleton path -> class path
        self.singletons_of: dict[str, list[str]] = {}
        # Filled by pass 2.
        self.evidence: dict[str, int] = {}  # written site -> first line (not a plain binding)
        self.rebinds: set[str] = set()
        self.rebound_globals: dict[str, int] = {}
        self.cell_uses: dict[tuple[_Scope, str], set[_Scope]] = {}
        self._filled: dict[ast.AST, frozenset[str]] = {}

    # -- helpers used by both passes ----------------------------------------------------
    def filled_params(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        got = self._filled.get(fn)
        if got is None:
            got = self._filled[fn] = _filled_params(fn)
        return got

    def new_code(self, qualname: str, firstlineno: int) -> _Code:
        code = _Code(qualname, firstlineno)
        self.codes.append(code)
        return code

    def _project_root(self) -> str | None:
        """The sys.path entry the module is imported from, derived from its file name."""
        if not os.path.isabs(self.filename) or not os.path.isfile(self.filename):
            return None
        d = os.path.dirname(self.filename)
        for _ in range(self.modname.count(".") + (1 if self.is_package else 0)):
            d = os.path.dirname(d)
        return d

    def module_exists(self, name: str) -> bool:
        if self.root is None or name.partition(".")[0] != self.modname.partition(".")[0]:
            return False
        found = self._exists_cache.get(name)
        if found is None:
            p = os.path.join(self.root, *name.split("."))
            found = os.path.isfile(p + ".py") or os.path.isdir(p)
            self._exists_cache[name] = found
        return found

    def resolve_relative(self, level: int, module: str | None) -> str | None:
        if level == 0:
            return module
        parts = self.package.split(".") if self.package else []
        if level - 1 > len(parts):
            return None
        base = parts[: len(parts) - (level - 1)]
        if module:
            base.extend(module.split("."))
        return ".".join(base) or None

    def mangle(self, name: str, scope: _Scope) -> str:
        """Private name mangling: ``__x`` inside class ``C`` is ``_C__x``."""
        cls = scope.private
        if cls is None or not name.startswith("__") or name.endswith("__") or "." in name:
            return name
        stripped = cls.lstrip("_")
        return f"_{stripped}{name}" if stripped else name

    def _local_bases(self, cls_path: str) -> list[str]:
        node, scope = self.class_nodes[cls_path]
        out = []
        for b in node.bases:
            if isinstance(b, ast.Name) and b.id in self.class_nodes:
                out.append(b.id)
            elif isinstance(b, ast.Attribute):
                dotted = ast.unparse(b)
                if dotted in self.class_nodes:
                    out.append(dotted)
        return out

    def _class_binds(self, cls_path: str, attr: str) -> bool:
        entry = self.class_nodes.get(cls_path)
        return entry is not None and attr in entry[1].bound

    def owner_class(self, cls_path: str, attr: str) -> str:
        """The class (this one or a base defined in this module) whose body binds ``attr``."""
        seen: set[str] = set()
        todo = [cls_path]
        while todo:
            c = todo.pop(0)
            if c in seen or c not in self.class_nodes:
                continue
            seen.add(c)
            if self._class_binds(c, attr):
                return c
            todo.extend(self._local_bases(c))
        return cls_path

    def owner_defines(self, cls_path: str, meth: str) -> bool:
        owner = self.owner_class(cls_path, meth)
        entry = self.class_nodes.get(owner)
        return entry is not None and meth in entry[1].defs

    # -- between the passes: declarations from the shape of values ---------------------
    def value_kind(self, value: ast.expr, rec: _Recorder, scope: _Scope) -> str | None:
        """``global``/``singleton`` if ``value`` evaluates to a fresh mutable object."""
        if isinstance(value, _MUTABLE_LITERALS):
            return "global"
        if isinstance(value, ast.Tuple):
            kinds = [self.value_kind(e, rec, scope) for e in value.elts]
            return "global" if any(kinds) else None
        if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Mult, ast.Add)):
            if isinstance(value.left, (ast.List, ast.ListComp)) or isinstance(
                value.right, (ast.List, ast.ListComp)
            ):
                return "global"
            return None
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        saved, rec.scope = rec.scope, scope
        try:
            if isinstance(func, ast.Name) and func.id in _MUTABLE_BUILTINS:
                if rec._is_builtin(func.id):
                    return "global"
            if isinstance(func, ast.Attribute) and func.attr in ("fromkeys", "copy"):
                return "global"
            refs, _ = rec._chain(func)
        finally:
            rec.scope = saved
        for r in refs:
            if (r.module, r.path) in _MUTABLE_FACTORIES:
                return "global"
            if r.kind == "class" and r.module == self.modname:
                return "singleton"
            if r.kind == "obj" and r.module != self.modname and r.path:
                last = r.path.rpartition(".")[2]
                if _is_capword(last) and r.module.partition(".")[0] not in _STDLIB:
                    return "singleton"
        return None

    def add_decl(self, site_path: str, kind: str, line: int) -> None:
        key = (f"{self.modname}:{site_path}", kind)
        if key not in self.decls or self.decls[key] > line:
            self.decls[key] = line

    def declare_from_values(self, rec: _Recorder) -> None:
        m = self.module_scope
        # Module-level names bound to mutable objects, in binding order.
        for name, values in m.values.items():
            if name.startswith("__") and name.endswith("__") or name in _IGNORED_GLOBALS:
                continue
            for value, line in values:
                if value is None:
                    continue
                kind = self.value_kind(value, rec, m)
                if kind is None and isinstance(value, ast.Name):
                    kind = self._alias_kind(value.id)
                if kind is None and self._is_memo_wrap(value):
                    self.add_decl(name, "cache", line)
                    self.cache_paths.add(name)
                    continue
                if kind is not None:
                    self.add_decl(name, kind, line)
                    if kind == "singleton":
                        cls = self._class_of_value(value, rec)
                        if cls is not None:
                            self.singleton_class[name] = cls
                            self.singletons_of.setdefault(cls, []).append(name)
                if isinstance(value, ast.Lambda):
                    self._declare_defaults(value.args, name, m, rec, self.scopes[value])
        for cls_path, (node, scope) in self.class_nodes.items():
            if self._is_enum(node):
                continue
            for name, values in scope.values.items():
                if name.startswith("__") and name.endswith("__"):
                    continue
                path = f"{cls_path}.{self.mangle(name, scope)}"
                for value, line in values:
                    if value is not None and self.value_kind(value, rec, scope) is not None:
                        self.add_decl(path, "class-attr", line)
                        self.shared_attrs.add(path)
        # Functions that live as long as the module: caches and mutable defaults.
        for fnode, scope in self.scopes.items():
            if scope.func_path is None or not isinstance(
                fnode, (ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            if any(_is_memo_decorator(d) for d in fnode.decorator_list):
                self.add_decl(scope.func_path, "cache", fnode.lineno)
                self.cache_paths.add(scope.func_path)
                if scope.parent is not None and scope.parent.kind == "class":
                    self.shared_attrs.add(scope.func_path)
            assert scope.parent is not None
            self._declare_defaults(fnode.args, scope.func_path, scope.parent, rec, scope)

    def _declare_defaults(
        self, args: ast.arguments, path: str, outer: _Scope, rec: _Recorder, scope: _Scope
    ) -> None:
        positional = [*args.posonlyargs, *args.args]
        offset = len(positional) - len(args.defaults)
        for i, d in enumerate(args.defaults):
            if self.value_kind(d, rec, outer) is not None:
                site = f"{path}.__defaults__[{i}]"
                self.add_decl(site, "mutable-default", d.lineno)
                scope.default_sites[positional[offset + i].arg] = site
        for a, kd in zip(args.kwonlyargs, args.kw_defaults):
            if kd is not None and self.value_kind(kd, rec, outer) is not None:
                site = f"{path}.__kwdefaults__[{a.arg!r}]"
                self.add_decl(site, "mutable-default", kd.lineno)
                scope.default_sites[a.arg] = site

    @staticmethod
    def _is_memo_wrap(value: ast.expr) -> bool:
        """``lru_cache(maxsize=1)(f)`` or ``functools.cache(f)`` bound to a name."""
        if not isinstance(value, ast.Call):
            return False
        if isinstance(value.func, ast.Call):
            return _is_memo_decorator(value.func)
        return (
            _is_memo_decorator(value.func)
            and len(value.args) == 1
            and isinstance(value.args[0], (ast.Name, ast.Attribute, ast.Lambda))
        )

    def _alias_kind(self, name: str) -> str | None:
        for (site, kind), _ in self.decls.items():
            if site == f"{self.modname}:{name}" and kind in ("global", "singleton"):
                return kind
        return None

    def _class_of_value(self, value: ast.expr, rec: _Recorder) -> str | None:
        if isinstance(value, ast.Name):
            return self.singleton_class.get(value.id)
        if not isinstance(value, ast.Call):
            return None
        saved, rec.scope = rec.scope, self.module_scope
        try:
            refs, _ = rec._chain(value.func)
        finally:
            rec.scope = saved
        for r in refs:
            if r.kind == "class" and r.module == self.modname:
                return r.path
        return None

    @staticmethod
    def _is_enum(node: ast.ClassDef) -> bool:
        for b in node.bases:
            name = _terminal_name(b)
            if name and (name.endswith("Enum") or name in ("Flag", "IntFlag")):
                return True
        return False

    # -- after pass 2 -------------------------------------------------------------------
    def declare_from_writes(self) -> None:
        mod = self.modname
        prefix = mod + ":"
        m = self.module_scope
        for name, line in self.rebound_globals.items():
            bindings = m.values.get(name)
            self.add_decl(name, "rebound-global", bindings[0][1] if bindings else line)
        for site, line in sorted(self.evidence.items(), key=lambda kv: kv[1]):
            if not site.startswith(prefix):
                continue
            path = site[len(prefix) :]
            if ".<closure>." in path:
                # A ``nonlocal`` rebinding; mutated containers are judged by escape below.
                if site in self.rebinds:
                    maker, _, rest = path.partition(".<closure>.")
                    self.add_decl(f"{maker}.<closure>.{_split_site_path(rest)[0]}", "closure", line)
                continue
            if self._covered(site):
                continue
            cls = self._class_prefix(path)
            if cls is not None:
                rest = path[len(cls) :]
                attr = _split_site_path(rest[1:])[0] if rest.startswith(".") else ""
                entry = self.class_nodes[cls][1].values.get(attr) if attr else None
                target = f"{cls}.{attr}" if attr else cls
                self.add_decl(target, "class-attr", entry[0][1] if entry else line)
                continue
            first, rest = _split_site_path(path)
            if first in m.defs and not _assigned(m, first):
                if rest.startswith("."):
                    # An attribute stored on a module-level function: ``f.calls += 1``.
                    self.add_decl(f"{first}.{_split_site_path(rest[1:])[0]}", "global", line)
                continue
            bindings = m.values.get(first)
            self.add_decl(first, "global", bindings[0][1] if bindings else line)
        # Mutable containers captured by a nested function that escapes its maker.
        for (owner, name), children in self.cell_uses.items():
            values = owner.values.get(name, ())
            mutable = [ln for v, ln in values if v is not None and self._is_fresh_mutable(v)]
            if not mutable:
                continue
            if any(c.kind == "lambda" or c.name in owner.loads for c in children):
                self.add_decl(f"{owner.qualname}.<closure>.{name}", "closure", mutable[0])

    def _covered(self, site: str) -> bool:
        """True if a declared site already covers ``site`` (equal or an enclosing site)."""
        for d, _ in self.decls:
            if len(d) <= len(site) and sites_overlap(d, site):
                return True
        return False

    @staticmethod
    def _is_fresh_mutable(value: ast.expr) -> bool:
        if isinstance(value, _MUTABLE_LITERALS):
            return True
        if isinstance(value, ast.Call):
            name = _terminal_name(value.func)
            return name in _MUTABLE_BUILTINS or any(name == n for _, n in _MUTABLE_FACTORIES)
        return False

    def _class_prefix(self, path: str) -> str | None:
        best = None
        for cls in self.class_nodes:
            if path == cls or path.startswith(cls + ".") or path.startswith(cls + "["):
                if best is None or len(cls) > len(best):
                    best = cls
        return best

    def result(self) -> tuple[ModuleState, Extra]:
        """The ModuleState, and what ``analyze_tree`` needs to link modules (``Extra``)."""
        mod = self.modname
        prefix = mod + ":"
        roots_by_name: dict[str, list[str]] = {}

        def add_root(site: str) -> None:
            first = _split_site_path(site[len(prefix) :])[0]
            roots_by_name.setdefault(first, []).append(site)

        for site, _ in self.decls:
            add_root(site)
        for site in self.evidence:
            # Closure cells are state only when declared (their maker's result escapes).
            if site.startswith(prefix) and ".<closure>." not in site:
                add_root(site)

        def is_state(site: str) -> bool:
            first = _split_site_path(site[len(prefix) :])[0]
            return any(sites_overlap(site, r) for r in roots_by_name.get(first, ()))

        cache_sites = {f"{prefix}{p}" for p in self.cache_paths}
        written: set[str] = set()
        codes: list[CodeAccess] = []
        dropped: list[list[str]] = []
        for c in self.codes:
            reads: set[str] = set()
            lost: list[str] = []
            writes: dict[str, int] = {}
            for site, line in c.writes.items():
                if not site.startswith(prefix) or is_state(site):
                    writes[site] = line
            for site, line in c.reads.items():
                if not site.startswith(prefix):
                    reads.add(site)
                elif is_state(site):
                    reads.add(site)
                    # Calling a memoized function fills its cache.
                    if site in cache_sites and site not in writes:
                        writes[site] = line
                elif ".<closure>." not in site:
                    lost.append(site)
            written.update(writes)
            clears = frozenset(site for site in c.cleared - c.set_or_added if site in writes)
            codes.append(
                CodeAccess(c.qualname, c.firstlineno, frozenset(reads), FrozenMap(writes), clears)
            )
            dropped.append(sorted(lost))
        decls = tuple(
            StateDecl(site, kind, line)
            for (site, kind), line in sorted(self.decls.items(), key=lambda kv: (kv[1], kv[0]))
        )
        exports = []
        m = self.module_scope
        for name, imp in m.imports.items():
            if _assigned(m, name) or name in self.declared_global:
                continue
            exports.append((name, imp.module if imp.attr is None else f"{imp.module}:{imp.attr}"))
        state = ModuleState(
            modname=mod,
            filename=self.filename,
            decls=decls,
            code=tuple(codes),
            exports=tuple(sorted(exports)),
            classes=tuple(self.class_nodes),
            rebinds=frozenset(self.rebinds & written),
        )
        lines: dict[str, int] = {}
        for name, values in m.values.items():
            lines[name] = values[0][1]
        for cls_path, (_, scope) in self.class_nodes.items():
            for name, values in scope.values.items():
                lines[f"{cls_path}.{self.mangle(name, scope)}"] = values[0][1]
        return state, Extra(dropped, lines)


def _analyze(source: str | bytes, modname: str, filename: str) -> tuple[ModuleState, Extra]:
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        where = f"{exc.filename or filename}:{exc.lineno}" if exc.lineno else filename
        return ModuleState(modname, filename, error=f"{where}: SyntaxError: {exc.msg}"), _NO_EXTRA
    except (ValueError, RecursionError, MemoryError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else ""
        error = f"{filename}: {type(exc).__name__}: {msg}"
        return ModuleState(modname, filename, error=error), _NO_EXTRA
    an = _Analyzer(tree, modname, filename)
    try:
        _Binder(an).visit(tree)
        rec = _Recorder(an)
        an.declare_from_values(rec)
        rec.visit(tree)
        an.declare_from_writes()
    except RecursionError:
        error = f"{filename}: source nests too deeply"
        return ModuleState(modname, filename, error=error), _NO_EXTRA
    return an.result()


def analyze_source(source: str, modname: str, filename: str) -> ModuleState:
    """Analyse module source text.

    ``modname`` is the module's importable name (it prefixes every local site) and
    ``filename`` its path (it resolves relative imports of submodules on disk).  Reads of
    other modules' names are kept whenever they could be state, except the standard
    library's; ``analyze_tree`` narrows them to the state it finds in the other modules.
    Never raises for bad source: the result then has ``error`` set.
    """
    return _analyze(source, modname, filename)[0]
