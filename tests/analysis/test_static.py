"""The static pass: state declarations, per-code accesses, module linking and the cache."""

from __future__ import annotations

import json
import os
import pickle
import sys
import textwrap
import types
from pathlib import Path

import pytest

from isolator.analysis import (
    CodeAccess,
    ModuleState,
    StateDecl,
    _tree,
    analyze_file,
    analyze_source,
    analyze_tree,
    modname_for_path,
    sites_overlap,
)


def analyze(src: str, modname: str = "m", filename: str = "<test>") -> ModuleState:
    state = analyze_source(textwrap.dedent(src), modname, filename)
    assert state.error == ""
    return state


def decls(state: ModuleState) -> set[tuple[str, str]]:
    return {(d.site, d.kind) for d in state.decls}


def code(state: ModuleState, qualname: str) -> CodeAccess:
    found = [c for c in state.code if c.qualname == qualname]
    assert len(found) == 1, [c.qualname for c in state.code]
    return found[0]


def write(root: Path, files: dict[str, str]) -> list[str]:
    paths = []
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
        paths.append(str(p))
    return paths


# -- sites_overlap ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("m:X", "m:X", True),
        ("m:X", "m:X['k']", True),
        ("m:X['k']", "m:X", True),
        ("m:X", "m:X.attr", True),
        ("m:X", "m:X.a['b'].c", True),
        ("m:X['a']", "m:X['a']['b']", True),
        ("m:X1", "m:X", False),
        ("m:X", "m:X1", False),
        ("m:X['a']", "m:X['b']", False),
        ("m:X['a']", "m:X['ab']", False),
        ("m:X.a", "m:X.ab", False),
        ("m:X", "n:X", False),
        ("pkg:X", "pkg.sub:X", False),
        ("<env>", "<env>:HOME", True),
        ("<env>:HOME", "<env>:HOMEDIR", False),
        ("<cwd>", "<cwd>", True),
    ],
)
def test_sites_overlap(a: str, b: str, expected: bool) -> None:
    assert sites_overlap(a, b) is expected
    assert sites_overlap(b, a) is expected


# -- declarations, one test per kind ------------------------------------------------------


def test_global_for_mutable_literals_and_constructors() -> None:
    state = analyze(
        """
        import collections
        import collections as co
        from collections import defaultdict as dd, deque
        A = {}
        B = [1, 2]
        C = {1}
        D = {k: 1 for k in "ab"}
        E = dict(a=1)
        F = collections.Counter()
        G = co.OrderedDict()
        H = dd(list)
        I = deque()
        J = bytearray(b"x")
        K = ([], 1)
        L = [0] * 3
        M = N = []
        P, Q = [], 5
        ALIAS = A
        CONST = 3
        NAME = "x"
        T = (1, 2)
        FS = frozenset({1})
        __all__ = ["A"]
        pytestmark = []
        """
    )
    found = decls(state)
    for name in "ABCDEFGHIJKLMNP":
        assert (f"m:{name}", "global") in found, name
    assert ("m:ALIAS", "global") in found
    for name in ("Q", "CONST", "NAME", "T", "FS", "__all__", "pytestmark"):
        assert not any(site == f"m:{name}" for site, _ in found), name
    assert {d.site: d.lineno for d in state.decls}["m:A"] == 5


def test_dict_shadowed_by_a_local_definition_is_not_a_constructor() -> None:
    state = analyze(
        """
        def dict():
            return 1
        X = dict()
        """
    )
    assert decls(state) == set()


def test_rebound_global_even_when_immutable() -> None:
    state = analyze(
        """
        COUNT = 0
        _conn = None

        def bump():
            global COUNT
            COUNT += 1

        def connect():
            global _conn, LATE
            _conn = object()
            LATE = 1

        def reader():
            return COUNT
        """
    )
    found = decls(state)
    assert ("m:COUNT", "rebound-global") in found
    assert ("m:_conn", "rebound-global") in found
    assert ("m:LATE", "rebound-global") in found
    assert {d.site: d.lineno for d in state.decls}["m:COUNT"] == 2
    assert {d.site: d.lineno for d in state.decls}["m:LATE"] == 12
    bump = code(state, "bump")
    assert bump.reads == {"m:COUNT"}
    assert dict(bump.writes) == {"m:COUNT": 7}
    assert code(state, "reader").reads == {"m:COUNT"}
    assert "m:COUNT" in state.rebinds


def test_lookups_in_globals_are_reads_of_the_global() -> None:
    # A global built on first use: ``if "V" not in globals(): global V; V = build()``.
    state = analyze(
        """
        _conn = None

        def validator():
            if "V" not in globals():
                global V
                V = object()

        def conn():
            global _conn
            if globals().get("_conn") is None:
                _conn = object()

        def conn2():
            global _conn
            if globals()["_conn"] is None:
                _conn = object()
        """
    )
    assert code(state, "validator").reads == {"m:V"}
    assert dict(code(state, "validator").writes) == {"m:V": 7}
    assert code(state, "conn").reads == {"m:_conn"}
    assert code(state, "conn2").reads == {"m:_conn"}


def test_a_helper_handed_a_container_writes_it_at_the_call() -> None:
    # A helper that fills whatever container it is handed writes, at each call, what the
    # caller hands it (by position, by keyword, to a method or a function).  A parameter
    # the helper rebinds is not the caller's object any more.
    state = analyze(
        """
        CACHE = {}
        QUEUE = []

        def _put(cache, key, value):
            cache[key] = value

        def _rebinds(cache):
            cache = dict(cache)
            cache["x"] = 1

        def fill():
            _put(CACHE, "k", 1)
            _rebinds(CACHE)

        class Table:
            _rows = {}
            _order = []

            def _add(self, value, cache):
                entry = cache.pop("k", {})
                entry["name"] = value
                cache["k"] = entry

            def row(self):
                self._add(cache=self._rows, value=2)

            def both(self):
                self._add(1, self._order)
        """
    )
    assert "m:CACHE" in code(state, "fill").writes
    assert set(code(state, "Table.row").writes) == {"m:Table._rows"}
    assert "m:Table._order" in code(state, "Table.both").writes
    assert "m:Table._rows" not in code(state, "Table.both").writes
    assert not code(state, "_put").writes and not code(state, "_rebinds").writes


def test_class_attributes() -> None:
    state = analyze(
        """
        class Config:
            registry = []
            debug = False
            retries = 3
            name = "x"
            __hidden = {}

            class Inner:
                items = {}

            @classmethod
            def enable(cls):
                cls.debug = True

            def bump(self):
                type(self).retries += 1

        def configure():
            setattr(Config, "name", "y")

        def unrelated():
            class Local:
                stuff = []
            Local.stuff = [1]
        """
    )
    found = decls(state)
    assert ("m:Config.registry", "class-attr") in found
    assert ("m:Config.debug", "class-attr") in found
    assert ("m:Config.retries", "class-attr") in found
    assert ("m:Config.name", "class-attr") in found
    assert ("m:Config._Config__hidden", "class-attr") in found
    assert ("m:Config.Inner.items", "class-attr") in found
    assert not any("Local" in site for site, _ in found)
    assert dict(code(state, "Config.enable").writes) == {"m:Config.debug": 14}
    assert code(state, "Config.bump").writes.keys() == {"m:Config.retries"}
    assert dict(code(state, "configure").writes) == {"m:Config.name": 20}
    assert code(state, "unrelated").writes == {}
    # An immutable class attribute is declared where the class binds it.
    assert {d.site: d.lineno for d in state.decls}["m:Config.debug"] == 4


def test_class_attribute_mutated_through_self_and_inherited() -> None:
    state = analyze(
        """
        class Base:
            seen = []

        class Child(Base):
            def __init__(self):
                self.own = []

            def note(self, x):
                self.seen.append(x)
                self.own.append(x)
                self.other = x
        """
    )
    note = code(state, "Child.note")
    assert dict(note.writes) == {"m:Base.seen": 10}
    assert code(state, "Child.__init__").writes == {}


def test_mutable_defaults() -> None:
    state = analyze(
        """
        def f(a, acc=[], n=0, seen={}, *, opts={}, flag=None):
            acc.append(a)
            seen[a] = 1
            return opts.get("x")

        class C:
            def m(self, cache={}):
                cache["k"] = 1

        g = lambda x, memo=[]: memo.append(x)

        def safe(x=None, y=(1, 2)):
            pass
        """
    )
    found = decls(state)
    assert ("m:f.__defaults__[0]", "mutable-default") in found
    assert ("m:f.__defaults__[2]", "mutable-default") in found
    assert ("m:f.__kwdefaults__['opts']", "mutable-default") in found
    assert ("m:C.m.__defaults__[0]", "mutable-default") in found
    assert ("m:g.__defaults__[0]", "mutable-default") in found
    assert not any(site.startswith("m:safe") for site, _ in found)
    f = code(state, "f")
    assert dict(f.writes) == {"m:f.__defaults__[0]": 3, "m:f.__defaults__[2]": 4}
    assert f.reads == {"m:f.__kwdefaults__['opts']['x']"}
    assert dict(code(state, "C.m").writes) == {"m:C.m.__defaults__[0]['k']": 9}
    assert code(state, "<lambda>").writes.keys() == {"m:g.__defaults__[0]"}


def test_caches() -> None:
    state = analyze(
        """
        import functools
        from functools import lru_cache, cached_property

        @functools.lru_cache(maxsize=None)
        def a(x):
            return x

        @lru_cache
        def b(x):
            return x

        @functools.cache
        def c(x):
            return x

        def raw(x):
            return x

        d = functools.lru_cache(maxsize=8)(raw)

        class K:
            @cached_property
            def prop(self):
                return 1

            @functools.lru_cache
            def meth(self):
                return 2

        def use():
            a(1)
            a.cache_clear()
            return d(2)

        @functools.wraps(raw)
        def not_a_cache():
            pass
        """
    )
    found = decls(state)
    for site in ("m:a", "m:b", "m:c", "m:d", "m:K.prop", "m:K.meth"):
        assert (site, "cache") in found, site
    assert not any(site in ("m:raw", "m:not_a_cache") for site, _ in found)
    use = code(state, "use")
    # Calling a memoized function fills its cache: a read and a write.
    assert use.reads == {"m:a", "m:d"}
    assert use.writes.keys() == {"m:a", "m:d"}


def test_closures() -> None:
    state = analyze(
        """
        def counter():
            n = 0
            def inc():
                nonlocal n
                n += 1
                return n
            return inc

        def memo(f):
            cache = {}
            def wrapper(k):
                if k not in cache:
                    cache[k] = f(k)
                return cache[k]
            return wrapper

        def local_only(items):
            acc = []
            def add(x):
                acc.append(x)
            for i in items:
                add(i)
            return acc

        def lambda_maker():
            seen = set()
            return lambda x: seen.add(x)
        """
    )
    found = decls(state)
    assert ("m:counter.<closure>.n", "closure") in found
    assert ("m:memo.<closure>.cache", "closure") in found
    assert ("m:lambda_maker.<closure>.seen", "closure") in found
    # ``add`` is called, never handed out: ``acc`` dies with each call of ``local_only``.
    assert not any("acc" in site for site, _ in found)
    inc = code(state, "counter.<locals>.inc")
    assert inc.reads == {"m:counter.<closure>.n"}
    assert dict(inc.writes) == {"m:counter.<closure>.n": 6}
    wrapper = code(state, "memo.<locals>.wrapper")
    assert wrapper.writes.keys() == {"m:memo.<closure>.cache"}
    assert "m:memo.<closure>.cache" in wrapper.reads
    assert code(state, "local_only.<locals>.add").writes == {}


def test_singletons_and_their_methods() -> None:
    state = analyze(
        """
        from .registry import Registry as ExtRegistry
        from pathlib import Path

        class Registry:
            def __init__(self):
                self.items = {}

            def register(self, name, obj):
                self.items[name] = obj

        REGISTRY = Registry()
        OTHER = ExtRegistry()
        HOME = Path("/")

        def plugin():
            REGISTRY.register("x", 1)
            return REGISTRY.items
        """,
        modname="pkg.mod",
    )
    found = decls(state)
    assert ("pkg.mod:REGISTRY", "singleton") in found
    assert ("pkg.mod:OTHER", "singleton") in found
    assert not any(site == "pkg.mod:HOME" for site, _ in found)
    reg = code(state, "Registry.register")
    assert reg.writes.keys() == {"pkg.mod:REGISTRY.items"}
    plugin = code(state, "plugin")
    # The call itself is accounted for by ``register``'s own code object.
    assert plugin.reads == {"pkg.mod:REGISTRY.items"}


def test_state_found_from_mutations_of_unknown_values() -> None:
    state = analyze(
        """
        import os
        _registry = make_registry()
        app = make_app()
        app.config["DEBUG"] = True
        TIMEOUT = 5

        def register(x):
            _registry.append(x)

        def count():
            count.calls += 1

        def env():
            os.environ["MODE"] = "x"
            return os.environ["MODE"]
        """
    )
    found = decls(state)
    assert ("m:_registry", "global") in found
    assert ("m:app", "global") in found
    assert ("m:count.calls", "global") in found
    assert not any(site == "m:TIMEOUT" for site, _ in found)
    assert dict(code(state, "<module>").writes) == {
        "m:_registry": 3,
        "m:app": 4,
        "m:app.config['DEBUG']": 5,
    }
    env = code(state, "env")
    # Writes to another module are kept; the standard library's reads are left to the
    # recorder's own tracking of process state.
    assert dict(env.writes) == {"os:environ['MODE']": 15}
    assert env.reads == set()


# -- per-code accesses ------------------------------------------------------------------


def test_fine_grained_sites() -> None:
    state = analyze(
        """
        SETTINGS = {"currency": "USD"}
        ITEMS = []
        class Config:
            debug = False
            opts = {}

        def f(key):
            SETTINGS["currency"] = "EUR"
            x = SETTINGS["lang"]
            y = SETTINGS[key]
            Config.debug = True
            Config.opts["a"] = 1
            del SETTINGS["old"]
            SETTINGS.update(a=1, b=2)
            SETTINGS.update({"c": 3})
            SETTINGS.setdefault("d", 4)
            SETTINGS.pop("e", None)
            ITEMS.pop(0)
            z = SETTINGS.get("f")
            w = "g" in SETTINGS
            n = len(SETTINGS)
            SETTINGS[key] = 1
            return x, y, z, w, n
        """
    )
    f = code(state, "f")
    assert dict(f.writes) == {
        "m:SETTINGS['currency']": 9,
        "m:Config.debug": 12,
        "m:Config.opts['a']": 13,
        "m:SETTINGS['old']": 14,
        "m:SETTINGS['a']": 15,
        "m:SETTINGS['b']": 15,
        "m:SETTINGS['c']": 16,
        "m:SETTINGS['d']": 17,
        "m:SETTINGS['e']": 18,
        "m:ITEMS": 19,
        "m:SETTINGS": 23,
    }
    assert f.reads == {
        "m:SETTINGS['lang']",
        "m:SETTINGS",
        "m:SETTINGS['d']",
        "m:SETTINGS['e']",
        "m:ITEMS",
        "m:SETTINGS['f']",
        "m:SETTINGS['g']",
    }


def test_constant_keys_of_other_types() -> None:
    state = analyze(
        """
        TABLE = {}
        def f():
            TABLE[1] = TABLE[-2]
            TABLE[(1, "a")] = TABLE[b"k"]
            TABLE["a"]["b"] = 1
        """
    )
    f = code(state, "f")
    assert f.writes.keys() == {"m:TABLE[1]", "m:TABLE[(1, 'a')]", "m:TABLE['a']['b']"}
    # The lookup of TABLE['a'] on the way to the store is covered by the write site.
    assert f.reads == {"m:TABLE[-2]", "m:TABLE[b'k']"}


def test_local_alias_of_module_state() -> None:
    state = analyze(
        """
        SETTINGS = {}
        def f():
            s = SETTINGS
            s["a"] = 1
            sub = SETTINGS.setdefault("nested", {})
            sub["b"] = 2
        """
    )
    assert code(state, "f").writes.keys() == {
        "m:SETTINGS['a']",
        "m:SETTINGS['nested']",
        "m:SETTINGS['nested']['b']",
    }


def test_import_aliasing() -> None:
    state = analyze(
        """
        import shop.config
        import shop.config as cfg
        from shop import config
        from shop.config import SETTINGS, Config as C
        from . import sibling
        from .. import up

        def f():
            shop.config.SETTINGS["a"] = 1
            cfg.SETTINGS["b"] = 2
            config.SETTINGS["c"] = 3
            SETTINGS["d"] = 4
            C.debug = True
            sibling.VALUE = 5
            up.X.append(1)
            from shop.other import THING
            THING.clear()
            return cfg.SETTINGS["e"], SETTINGS["f"]
        """,
        modname="pkg.sub.mod",
    )
    f = code(state, "f")
    assert dict(f.writes) == {
        "shop.config:SETTINGS['a']": 10,
        "shop.config:SETTINGS['b']": 11,
        # ``import shop.config`` above tells that ``config`` is a submodule.
        "shop.config:SETTINGS['c']": 12,
        "shop.config:SETTINGS['d']": 13,
        "shop.config:Config.debug": 14,
        "pkg.sub:sibling.VALUE": 15,
        "pkg:up.X": 16,
        "shop.other:THING": 18,
    }
    assert f.reads == {"shop.config:SETTINGS['e']", "shop.config:SETTINGS['f']"}
    assert dict(state.exports)["C"] == "shop.config:Config"


def test_relative_submodule_found_on_disk(tmp_path: Path) -> None:
    (paths := write(tmp_path, {"pkg/__init__.py": "", "pkg/cfg.py": "X = {}\n"}))
    src = "from . import cfg\ndef f():\n    cfg.X['k'] = 1\n"
    mod = tmp_path / "pkg" / "mod.py"
    mod.write_text(src)
    state = analyze_file(mod, "pkg.mod")
    assert paths
    assert dict(code(state, "f").writes) == {"pkg.cfg:X['k']": 3}


def test_scoping_rules() -> None:
    state = analyze(
        """
        X = {}
        Y = {}

        def shadow(X):
            X["a"] = 1

        def local():
            Y = {}
            Y["a"] = 1

        def later_local():
            print(Y)
            Y = 2

        class K:
            X = {}
            def m(self):
                X["b"] = 1
            vals = [X for _ in range(1)]

        def comp():
            return [Y["c"] for Y in ()] + [Y["d"] for _ in ()]
        """
    )
    assert code(state, "shadow").writes == {}
    assert code(state, "local").writes == {}
    assert code(state, "later_local").reads == set()
    # In a method, ``X`` is the module's X, not the class attribute.
    assert dict(code(state, "K.m").writes) == {"m:X['b']": 19}
    comp_reads = set().union(*(c.reads for c in state.code if c.qualname.startswith("comp")))
    assert comp_reads == {"m:Y['d']"}
    # A comprehension in a class body cannot see the class's names: X is the module's.
    # (Its code object is the class body's on 3.12+, its own before.)
    class_reads = set().union(
        *(c.reads for c in state.code if c.qualname == "K" or c.qualname.startswith("K.<"))
    )
    assert class_reads == {"m:X"}


def test_module_and_class_bodies_are_code_too() -> None:
    state = analyze(
        """
        SETTINGS = {}
        SETTINGS["x"] = 1
        class K:
            flag = SETTINGS["y"]
        """
    )
    assert dict(code(state, "<module>").writes) == {"m:SETTINGS": 2, "m:SETTINGS['x']": 3}
    assert code(state, "K").reads == {"m:SETTINGS['y']"}


# -- code objects: qualname and co_firstlineno as CPython compiles them -------------------

CODE_SHAPES = '''\
# leading comment
"""Docstring."""
import functools


@functools.lru_cache(
    maxsize=None,
)
def decorated(x=[], y=lambda: 1, *, z=(i for i in ())):
    return [i for i in x] + list(j for j in x) + [lambda: k for k in x]


@dec1(lambda q: q)
@dec2
class C:
    @staticmethod
    def m(self):
        g = lambda y: (
            y)
        return {k: v for k, v in ()}

    def __priv(self):
        pass

    xs = [i for i in range(3)]

    class D:
        async def an(self):
            return [x async for x in self]


def outer():
    def inner():
        return (lambda: 1)

    class K:
        def q(self):
            pass
        zz = (w for w in ())

    global gfun

    def gfun():
        pass

    return inner, [lambda: 2 for _ in ()], (lambda: 3 for _ in ())


async def co():
    pass


h = (
    lambda a:
    a)
gen = (
    i for i in
    range(3))
nested = [[y for y in x] for x in ()]
'''


def _compiled_codes(src: str) -> list[types.CodeType]:
    out: list[types.CodeType] = []

    def walk(c: types.CodeType) -> None:
        out.append(c)
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                walk(k)

    walk(compile(src, "<shapes>", "exec"))
    return out


def _name(c: types.CodeType) -> str:
    return getattr(c, "co_qualname", c.co_name)


def test_code_objects_match_what_cpython_compiles() -> None:
    state = analyze_source(CODE_SHAPES, "m", "<shapes>")
    compiled = _compiled_codes(CODE_SHAPES)
    ours = sorted((c.qualname, c.firstlineno) for c in state.code)
    if sys.version_info >= (3, 11):
        assert ours == sorted((_name(c), c.co_firstlineno) for c in compiled)
    else:  # no co_qualname: compare the last component
        ours = sorted((q.rpartition(".")[2], n) for q, n in ours)
        assert ours == sorted((c.co_name, c.co_firstlineno) for c in compiled)
    for c in compiled:
        found = state.access_for(c.co_firstlineno, _name(c))
        assert found is not None, (_name(c), c.co_firstlineno)
        assert found.firstlineno == c.co_firstlineno
    # The decorated function starts at its first decorator, as CPython reports.
    assert code(state, "decorated").firstlineno == 6


def test_access_for_lookup() -> None:
    state = analyze(
        """
        S = {}
        @deco(lambda: S["a"])
        def f():
            S["b"] = 1
        """
    )
    f = state.access_for(3, "f")
    assert f is not None and f.qualname == "f"
    lam = state.access_for(3, "<lambda>")
    assert lam is not None and lam.reads == {"m:S['a']"}
    merged = state.access_for(3)
    assert merged is not None
    assert merged.reads == {"m:S['a']"} and merged.writes.keys() == {"m:S['b']"}
    assert state.access_for(3, "nope") is None
    assert state.access_for(99) is None
    assert state.access_for(1, "<module>") is state.code[0]


# -- bad input ----------------------------------------------------------------------------


def test_syntax_error_gives_an_error_state() -> None:
    state = analyze_source("def f(:\n    pass\n", "m", "bad.py")
    assert state.decls == () and state.code == ()
    assert state.error.startswith("bad.py:1: SyntaxError")
    assert "\n" not in state.error


@pytest.mark.parametrize(
    "content",
    [b"x = (\n", b"x = 1\x00\n", b"\xff\xfe = 1\n", b"# -*- coding: nope -*-\nx = 1\n"],
)
def test_bad_files_never_raise(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "bad.py"
    p.write_bytes(content)
    state = analyze_file(p, "bad")
    assert state.error and state.decls == () and state.code == ()
    assert "\n" not in state.error


def test_unreadable_file(tmp_path: Path) -> None:
    state = analyze_file(tmp_path / "missing.py", "missing")
    assert "missing.py" in state.error
    assert analyze_file(tmp_path, "dir").error


def test_source_encoding_cookie(tmp_path: Path) -> None:
    p = tmp_path / "latin.py"
    p.write_bytes(b"# -*- coding: latin-1 -*-\nS = {'\xe9': 1}\ndef f():\n    S['\xe9'] = 2\n")
    state = analyze_file(p, "latin")
    assert dict(code(state, "f").writes) == {"latin:S['\xe9']": 4}


# -- module names -------------------------------------------------------------------------


def test_modname_for_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path,
        {
            "src/shop/__init__.py": "",
            "src/shop/sub/__init__.py": "",
            "src/shop/sub/mod.py": "",
            "tests/test_a.py": "",
            "tests/conftest.py": "",
            "tests/helpers.py": "",
            "src/nspkg/mod.py": "",
        },
    )
    assert modname_for_path(tmp_path / "src/shop/sub/mod.py", tmp_path) == "shop.sub.mod"
    assert modname_for_path(tmp_path / "src/shop/sub/__init__.py", tmp_path) == "shop.sub"
    assert modname_for_path(tmp_path / "tests/test_a.py", tmp_path) == "test_a"
    assert modname_for_path(tmp_path / "tests/conftest.py", tmp_path) == "conftest"
    assert modname_for_path(tmp_path / "tests/test_a.py", tmp_path, "importlib") == "tests.test_a"
    monkeypatch.setattr(sys, "path", [str(tmp_path / "src"), *sys.path])
    assert modname_for_path(tmp_path / "src/nspkg/mod.py", tmp_path) == "nspkg.mod"
    assert modname_for_path(tmp_path / "tests/helpers.py", tmp_path) == "tests.helpers"


# -- trees: linking modules ---------------------------------------------------------------

SHOP = {
    "shop/__init__.py": """
        from .config import SETTINGS, Config
        from . import config
        """,
    "shop/config.py": """
        import functools
        SETTINGS = {"currency": "USD"}
        MODE = "prod"
        LIMIT = 10

        class Config:
            debug = False
            retries = 3

        @functools.lru_cache(maxsize=None)
        def rate(cur):
            return 1.0

        def limit():
            return LIMIT
        """,
    "shop/service.py": """
        from shop import config
        from shop import SETTINGS
        import shop.config as cfg
        import shop
        import json

        def price(x):
            if config.MODE == "test":
                return 0
            return x * config.rate(SETTINGS["currency"]) * cfg.Config.retries

        def set_currency(c):
            shop.SETTINGS["currency"] = c
            shop.Config.debug = True

        def dumps(x):
            return json.dumps(x), cfg.limit
        """,
    "tests/test_shop.py": """
        from shop import config, service
        from shop.config import Config
        import shop.config

        def test_mode():
            config.MODE = "test"
            Config.retries = 5
            shop.config.LIMIT = 1
            assert service.price(3) == 0
        """,
}


def test_tree_links_modules(tmp_path: Path) -> None:
    paths = write(tmp_path, SHOP)
    tree = analyze_tree(paths, tmp_path)
    assert set(tree) == {"shop", "shop.config", "shop.service", "test_shop"}
    cfg = tree["shop.config"]
    assert decls(cfg) == {
        ("shop.config:SETTINGS", "global"),
        ("shop.config:rate", "cache"),
        # Declared because other modules write them.
        ("shop.config:MODE", "rebound-global"),
        ("shop.config:LIMIT", "rebound-global"),
        ("shop.config:Config.retries", "class-attr"),
        ("shop.config:Config.debug", "class-attr"),
    }
    assert {d.site: d.lineno for d in cfg.decls}["shop.config:MODE"] == 4
    # Now that another module rebinds LIMIT, the function reading it reads state.
    assert code(cfg, "limit").reads == {"shop.config:LIMIT"}
    service = tree["shop.service"]
    price = code(service, "price")
    assert price.reads == {
        "shop.config:MODE",
        "shop.config:rate",
        "shop.config:SETTINGS['currency']",
        "shop.config:Config.retries",
    }
    assert price.writes.keys() == {"shop.config:rate"}  # filling the cache
    # Through the package's re-exports, to the owner.
    assert code(service, "set_currency").writes.keys() == {
        "shop.config:SETTINGS['currency']",
        "shop.config:Config.debug",
    }
    # A function object of another module is not state.
    assert code(service, "dumps").reads == set()
    test = code(tree["test_shop"], "test_mode")
    assert test.writes.keys() == {
        "shop.config:MODE",
        "shop.config:Config.retries",
        "shop.config:LIMIT",
    }


def test_rebinding_a_reexported_name_stays_with_the_reexporter(tmp_path: Path) -> None:
    paths = write(
        tmp_path,
        {
            "pkg/__init__.py": "from .core import STATE\n",
            "pkg/core.py": "STATE = {}\n",
            "user.py": "import pkg\ndef f():\n    pkg.STATE = {}\n    pkg.STATE['k'] = 1\n",
        },
    )
    tree = analyze_tree(paths, tmp_path, use_cache=False)
    assert code(tree["user"], "f").writes.keys() == {"pkg:STATE", "pkg.core:STATE['k']"}
    assert ("pkg:STATE", "rebound-global") in decls(tree["pkg"])


# -- the cache ----------------------------------------------------------------------------


def test_cache_is_used_and_invalidated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write(tmp_path, SHOP)
    cold = analyze_tree(paths, tmp_path)
    cache_file = tmp_path / ".isolator" / "static-cache.json"
    assert cache_file.is_file()
    calls: list[str] = []
    real = _tree._analyze_path

    def counting(path: str, modname: str) -> object:
        calls.append(modname)
        return real(path, modname)

    monkeypatch.setattr(_tree, "_analyze_path", counting)
    assert analyze_tree(paths, tmp_path) == cold
    assert calls == []
    # Editing one file re-analyses that file only.
    target = tmp_path / "shop" / "config.py"
    target.write_text(target.read_text() + "\nEXTRA = []\n")
    warm = analyze_tree(paths, tmp_path)
    assert calls == ["shop.config"]
    assert ("shop.config:EXTRA", "global") in decls(warm["shop.config"])


@pytest.mark.parametrize(
    "garbage",
    [
        "{not json",
        "[]",
        json.dumps({"schema": "other"}),
        json.dumps({"schema": "isolator.static-cache/1", "entries": {_tree._PY_KEY: []}}),
        "",
    ],
)
def test_corrupt_cache_is_ignored_and_rebuilt(tmp_path: Path, garbage: str) -> None:
    paths = write(tmp_path, SHOP)
    expected = analyze_tree(paths, tmp_path, use_cache=False)
    cache_file = tmp_path / ".isolator" / "static-cache.json"
    cache_file.parent.mkdir()
    cache_file.write_text(garbage)
    assert analyze_tree(paths, tmp_path) == expected
    data = json.loads(cache_file.read_text())
    assert data["schema"] == "isolator.static-cache/1"
    assert len(data["entries"][_tree._PY_KEY]) == len(paths)


def test_damaged_cache_entry_is_reanalysed(tmp_path: Path) -> None:
    paths = write(tmp_path, SHOP)
    expected = analyze_tree(paths, tmp_path)
    cache_file = tmp_path / ".isolator" / "static-cache.json"
    data = json.loads(cache_file.read_text())
    for entry in data["entries"][_tree._PY_KEY].values():
        entry["state"] = {"modname": 3}
    cache_file.write_text(json.dumps(data))
    assert analyze_tree(paths, tmp_path) == expected


def test_tree_with_a_broken_file(tmp_path: Path) -> None:
    paths = write(tmp_path, {"good.py": "X = []\n", "bad.py": "def (\n"})
    tree = analyze_tree([*paths, str(tmp_path / "gone.py")], tmp_path)
    assert tree["bad"].error and tree["gone"].error
    assert decls(tree["good"]) == {("good:X", "global")}
    assert analyze_tree(paths, tmp_path)["bad"].error  # served from the cache too


# -- data round trips ---------------------------------------------------------------------


def test_module_state_json_round_trip_and_pickle() -> None:
    state = analyze(
        """
        S = {}
        def f():
            S["a"] = 1
            return S["b"]
        """
    )
    again = ModuleState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state
    assert hash(again) == hash(state)
    assert pickle.loads(pickle.dumps(state)) == state
    f = code(again, "f")
    assert dict(f.writes) == {"m:S['a']": 4}
    with pytest.raises(TypeError):
        f.writes["x"] = 1  # type: ignore[index]
    assert StateDecl("m:S", "global", 2) in again.decls


def test_does_not_import_the_analysed_code(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    paths = write(
        tmp_path,
        {"boom.py": f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\nX = []\n"},
    )
    tree = analyze_tree(paths, tmp_path)
    assert decls(tree["boom"]) == {("boom:X", "global")}
    assert not marker.exists()
    assert "boom" not in sys.modules
    assert os.path.isfile(paths[0])


def test_namespace_writes_through_setattr_and_globals() -> None:
    state = analyze(
        """
        import shop.config as cfg
        MODE = "prod"

        def f(name):
            setattr(cfg, "DEBUG", True)
            globals()["MODE"] = "test"
            globals()[name] = 1
            delattr(cfg, "OLD")
        """
    )
    assert dict(code(state, "f").writes) == {
        "shop.config:DEBUG": 6,
        "m:MODE": 7,
        "shop.config:OLD": 9,
    }
    assert ("m:MODE", "global") in decls(state)


def test_unreadable_file_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write(tmp_path, {"locked.py": "X = []\n"})

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_tree, "open", denied, raising=False)
    assert "Permission denied" in analyze_tree(paths, tmp_path)["locked"].error
    monkeypatch.undo()
    # Same mtime and size, but the failed read was not cached.
    assert decls(analyze_tree(paths, tmp_path)["locked"]) == {("locked:X", "global")}


def test_a_site_a_code_only_empties_is_a_clear_and_survives_the_json_round_trip() -> None:
    # ``clear_caches`` empties the memo; ``fill`` adds to it; ``both`` empties and adds
    # (a reset that refills: not only a clear).
    state = analyze(
        """
        import functools

        class V:
            _done = set()

            @classmethod
            def clear_caches(cls):
                cls._done.clear()
                cached.cache_clear()

            @classmethod
            def fill(cls, k):
                if k not in cls._done:
                    cls._done.add(k)

            @classmethod
            def both(cls):
                cls._done.clear()
                cls._done.add(0)

        @functools.lru_cache
        def cached(x):
            return x
        """
    )
    assert code(state, "V.clear_caches").clears == {"m:V._done", "m:cached"}
    assert not code(state, "V.fill").clears
    assert "m:V._done" in code(state, "V.both").writes and not code(state, "V.both").clears
    again = ModuleState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state
    assert code(again, "V.clear_caches").clears == {"m:V._done", "m:cached"}
