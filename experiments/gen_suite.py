"""Generate a synthetic project with real import cost and thousands of fast, state-sharing tests.

The project is the benchmark's stand-in for a large application suite: a package ``genpkg`` of
``modules`` modules (each imports a few stdlib modules, computes tables at import time and
holds module-level dicts, lists, counters, class attributes and ``lru_cache`` caches) and a
``tests/`` directory with one test module per package module. The tests read that state,
write it and restore it, or write it without restoring on keys no other test reads, so the
whole suite passes in its declared order under plain pytest *and* every test passes alone:
any outcome change under isolation is a bug of the isolation, not of the suite.

Usage::

    python experiments/gen_suite.py DEST [--modules 40] [--tests 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

MARKER = ".gen_suite.json"
PACKAGE = "genpkg"

_CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY", "SEK")
_MODES = ("prod", "staging", "dev", "batch")
_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
)  # fmt: skip


class GenError(Exception):
    """Bad generator input; the message is one line for the user."""


def _module_source(idx: int, n_modules: int, rng: random.Random) -> str:
    """Source of one package module: state, classes, helpers and import-time work."""
    name = f"m{idx:02d}"
    deps = sorted(rng.sample(range(idx), k=min(idx, rng.randint(0, 2))))
    # One line, so that textwrap.dedent below still sees the common indentation.
    dep_imports = f"from {PACKAGE} import " + ", ".join(f"m{d:02d}" for d in deps) if deps else ""
    dep_names = "(" + "".join(f"m{d:02d}, " for d in deps) + ")"
    currency = rng.choice(_CURRENCIES)
    mode = rng.choice(_MODES)
    level = rng.randint(1, 9)
    rate = f"{rng.randint(101, 199) / 100:.2f}"
    words = rng.sample(_WORDS, k=4)
    n_table = rng.randint(250, 400)
    n_patterns = rng.randint(12, 20)
    return textwrap.dedent(
        f'''\
        """Generated module {name}: shared state and helpers."""

        from __future__ import annotations

        import dataclasses
        import decimal
        import functools
        import hashlib
        import json
        import os
        import re

        {dep_imports or "# no sibling imports"}

        NAME = "{name}"
        DEPENDS_ON = {dep_names}
        SETTINGS: dict[str, object] = {{
            "currency": "{currency}",
            "mode": "{mode}",
            "level": {level},
            "rate": "{rate}",
            "labels": {words!r},
        }}
        REGISTRY: list[str] = {words[:2]!r}
        SCRATCH: dict[str, object] = {{}}
        COUNTER = 0
        MODE = "{mode}"

        # Import-time work, as real modules do (tables, compiled patterns, parsed documents).
        _CTX = decimal.Context(prec=28)
        TABLE = {{
            i: str(_CTX.divide(decimal.Decimal(i * {idx + 3}), decimal.Decimal(7)))
            for i in range({n_table})
        }}
        PATTERNS = [re.compile(rf"^{name}_(\\d+)_{{i}}_([a-z]+)$") for i in range({n_patterns})]
        DOCUMENT = json.loads(json.dumps({{"name": NAME, "table": list(TABLE.values())[:64]}}))
        DIGEST = hashlib.sha256("".join(TABLE.values()).encode()).hexdigest()


        @dataclasses.dataclass
        class Record{idx:02d}:
            key: str
            value: int
            tags: list[str] = dataclasses.field(default_factory=list)

            def weight(self) -> int:
                return self.value * int(SETTINGS["level"]) + len(self.tags)


        class Service{idx:02d}:
            instances = 0
            defaults: dict[str, object] = {{"retries": {rng.randint(1, 5)}, "timeout": 1.5}}

            def __init__(self, name: str) -> None:
                self.name = name
                Service{idx:02d}.instances += 1

            def option(self, key: str) -> object:
                return self.defaults.get(key)


        @functools.lru_cache(maxsize=None)
        def fib(n: int) -> int:
            return n if n < 2 else fib(n - 1) + fib(n - 2)


        def digest() -> str:
            return hashlib.sha256("".join(TABLE.values()).encode()).hexdigest()


        def bump(k: int = 1) -> int:
            global COUNTER
            COUNTER += k
            return COUNTER


        def register(item: str) -> int:
            REGISTRY.append(item)
            return len(REGISTRY)


        def scaled(x: int) -> int:
            return x * int(SETTINGS["level"])


        def price(amount: str) -> str:
            value = decimal.Decimal(amount) * decimal.Decimal(str(SETTINGS["rate"]))
            return f"{{value.quantize(decimal.Decimal('0.01'))}} {{SETTINGS['currency']}}"


        def parse(text: str) -> tuple[int, str] | None:
            for pattern in PATTERNS:
                match = pattern.match(text)
                if match:
                    return int(match.group(1)), match.group(2)
            return None


        def render(obj: object) -> str:
            return json.dumps(obj, sort_keys=True)


        def env_mode() -> str:
            return os.environ.get("GEN_{name.upper()}_MODE", MODE)


        def neighbours() -> list[str]:
            return [m.NAME for m in DEPENDS_ON]
        '''
    )


class _TestWriter:
    """Emits the test functions of one test module; each unit yields one or more test cases."""

    def __init__(self, idx: int, n_modules: int, rng: random.Random) -> None:
        self.idx = idx
        self.n_modules = n_modules
        self.rng = rng
        self.mod = f"m{idx:02d}"
        self.count = 0
        self.parts: list[str] = []

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"test_{kind}_{self.count:03d}"

    def emit(self, text: str) -> None:
        self.parts.append(textwrap.dedent(text).strip("\n") + "\n")

    # Each unit returns how many test cases it created.

    def read_settings(self, budget: int) -> int:
        key, expect = self.rng.choice([("currency", "str"), ("mode", "str"), ("level", "int")])
        self.emit(
            f"""
            def {self._name("read_settings")}():
                value = mod.SETTINGS[{key!r}]
                assert value == ORIGINAL[{key!r}]
                assert isinstance(value, {expect})
            """
        )
        return 1

    def read_table(self, budget: int) -> int:
        i = self.rng.randint(0, 200)
        self.emit(
            f"""
            def {self._name("read_table")}():
                assert mod.digest() == mod.DIGEST
                assert round(decimal.Decimal(mod.TABLE[{i}]) * 7) == {i * (self.idx + 3)}
            """
        )
        return 1

    def cached(self, budget: int) -> int:
        n = self.rng.randint(15, 60)
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        self.emit(
            f"""
            def {self._name("cached")}():
                assert mod.fib({n}) == {a}
            """
        )
        return 1

    def write_restore(self, budget: int) -> int:
        level = self.rng.randint(10, 20)
        self.emit(
            f"""
            def {self._name("write_restore")}():
                old = mod.SETTINGS["level"]
                mod.SETTINGS["level"] = {level}
                try:
                    assert mod.scaled(3) == {3 * level}
                finally:
                    mod.SETTINGS["level"] = old
            """
        )
        return 1

    def monkeypatched(self, budget: int) -> int:
        currency = self.rng.choice(_CURRENCIES)
        self.emit(
            f"""
            def {self._name("monkeypatched")}(monkeypatch):
                monkeypatch.setitem(mod.SETTINGS, "currency", {currency!r})
                monkeypatch.setitem(mod.SETTINGS, "rate", "2.00")
                assert mod.price("1.25") == "2.50 {currency}"
            """
        )
        return 1

    def scratch(self, budget: int) -> int:
        # Written and never restored: no other test reads this key.
        key = f"{self.mod}-{self.count + 1}"
        self.emit(
            f"""
            def {self._name("scratch")}():
                mod.SCRATCH[{key!r}] = {{"seen": True}}
                assert mod.SCRATCH[{key!r}] == {{"seen": True}}
            """
        )
        return 1

    def counter(self, budget: int) -> int:
        k = self.rng.randint(1, 4)
        self.emit(
            f"""
            def {self._name("counter")}():
                before = mod.COUNTER
                assert mod.bump({k}) == before + {k}
            """
        )
        return 1

    def registry(self, budget: int) -> int:
        item = f"{self.mod}-item-{self.count + 1}"
        self.emit(
            f"""
            def {self._name("registry")}():
                size = mod.register({item!r})
                assert mod.REGISTRY[size - 1] == {item!r}
                assert mod.REGISTRY[:2] == ORIGINAL_REGISTRY
            """
        )
        return 1

    def class_attr(self, budget: int) -> int:
        key = f"opt_{self.count + 1}"
        self.emit(
            f"""
            def {self._name("class_attr")}():
                service = mod.Service{self.idx:02d}("s")
                mod.Service{self.idx:02d}.defaults[{key!r}] = 1
                assert service.option({key!r}) == 1
                assert service.option("timeout") == 1.5
                assert mod.Service{self.idx:02d}.instances >= 1
            """
        )
        return 1

    def record(self, budget: int) -> int:
        value = self.rng.randint(1, 50)
        tags = self.rng.sample(_WORDS, k=self.rng.randint(0, 3))
        self.emit(
            f"""
            def {self._name("record")}():
                rec = mod.Record{self.idx:02d}("k", {value}, {tags!r})
                assert rec.weight() == {value} * ORIGINAL["level"] + {len(tags)}
                assert dataclasses.asdict(rec)["tags"] == {tags!r}
            """
        )
        return 1

    def parsing(self, budget: int) -> int:
        n, word = self.rng.randint(0, 999), self.rng.choice(_WORDS)
        self.emit(
            f"""
            def {self._name("parsing")}():
                assert mod.parse("{self.mod}_{n}_0_{word}") == ({n}, {word!r})
                assert mod.parse("nothing") is None
            """
        )
        return 1

    def rendering(self, budget: int) -> int:
        self.emit(
            f"""
            def {self._name("rendering")}():
                text = mod.render({{"b": [1, 2], "a": mod.NAME}})
                assert json.loads(text) == {{"a": {self.mod!r}, "b": [1, 2]}}
                assert text.startswith('{{"a"')
            """
        )
        return 1

    def environment(self, budget: int) -> int:
        value = self.rng.choice(_MODES)
        self.emit(
            f"""
            def {self._name("environment")}(monkeypatch):
                assert mod.env_mode() == mod.MODE
                monkeypatch.setenv("GEN_{self.mod.upper()}_MODE", {value!r})
                assert mod.env_mode() == {value!r}
            """
        )
        return 1

    def rebind(self, budget: int) -> int:
        self.emit(
            f"""
            def {self._name("rebind")}(monkeypatch):
                monkeypatch.setattr(mod, "MODE", "test")
                assert mod.env_mode() == "test"
            """
        )
        return 1

    def decimal_local(self, budget: int) -> int:
        self.emit(
            f"""
            def {self._name("decimal_local")}():
                with decimal.localcontext() as ctx:
                    ctx.prec = 4
                    assert str(decimal.Decimal(1) / decimal.Decimal(7)) == "0.1429"
                assert mod.price("1.00").endswith(ORIGINAL["currency"])
            """
        )
        return 1

    def cross_module(self, budget: int) -> int:
        other = self.rng.randrange(self.n_modules)
        self.emit(
            f"""
            def {self._name("cross_module")}():
                other = importlib.import_module("{PACKAGE}.m{other:02d}")
                assert other.NAME == "m{other:02d}"
                assert other.digest() == other.DIGEST
                assert set(mod.neighbours()) <= set(NAMES)
            """
        )
        return 1

    def parametrized(self, budget: int) -> int:
        k = min(budget, self.rng.randint(2, 6))
        values = self.rng.sample(range(1, 100), k=k)
        self.emit(
            f"""
            @pytest.mark.parametrize("x", {values!r})
            def {self._name("parametrized")}(x):
                assert mod.scaled(x) == x * ORIGINAL["level"]
                assert mod.fib(x % 30) >= 0
            """
        )
        return k

    def fixture_state(self, budget: int) -> int:
        self.emit(
            f"""
            def {self._name("fixture_state")}(module_tag):
                assert mod.SETTINGS["module_tag"] == module_tag
            """
        )
        return 1

    def class_group(self, budget: int) -> int:
        k = min(budget, self.rng.randint(2, 4))
        methods = "\n".join(
            f"    def test_method_{j}(self):\n"
            f'        assert mod.scaled({j + 1}) == {j + 1} * ORIGINAL["level"]\n'
            f'        assert mod.SETTINGS["labels"][{j % 4}] == ORIGINAL["labels"][{j % 4}]\n'
            for j in range(k)
        )
        self.count += 1
        self.parts.append(f"class TestGroup{self.count:03d}:\n{methods}")
        return k

    def tmp_file(self, budget: int) -> int:
        self.emit(
            f"""
            def {self._name("tmp_file")}(tmp_path):
                target = tmp_path / "out.json"
                target.write_text(mod.render(mod.DOCUMENT))
                assert json.loads(target.read_text())["name"] == mod.NAME
            """
        )
        return 1

    def header(self) -> str:
        session_check = ""
        if self.idx == 0:
            session_check = textwrap.dedent(
                """

                def test_session_fixture_state():
                    # Set by the session fixture in conftest.py: part of the baseline.
                    assert mod.SETTINGS["session"] == "on"
                """
            )
        return (
            textwrap.dedent(
                f'''\
                """Generated tests for {PACKAGE}.{self.mod}."""

                import dataclasses
                import decimal
                import importlib
                import json

                import pytest

                from {PACKAGE} import {self.mod} as mod

                NAMES = [f"m{{i:02d}}" for i in range({self.n_modules})]
                ORIGINAL = {{
                    k: v for k, v in mod.SETTINGS.items() if k not in ("session", "module_tag")
                }}
                ORIGINAL_REGISTRY = list(mod.REGISTRY[:2])


                @pytest.fixture(scope="module")
                def module_tag():
                    mod.SETTINGS["module_tag"] = "tag-{self.mod}"
                    yield "tag-{self.mod}"
                    del mod.SETTINGS["module_tag"]
                '''
            )
            + session_check
        )


def _test_source(idx: int, n_modules: int, n_tests: int, rng: random.Random) -> str:
    """Source of the test module for package module ``idx`` with exactly ``n_tests`` cases."""
    writer = _TestWriter(idx, n_modules, rng)
    units: list[tuple[Callable[[int], int], int]] = [
        (writer.read_settings, 10),
        (writer.read_table, 4),
        (writer.cached, 6),
        (writer.write_restore, 8),
        (writer.monkeypatched, 6),
        (writer.scratch, 8),
        (writer.counter, 6),
        (writer.registry, 5),
        (writer.class_attr, 5),
        (writer.record, 6),
        (writer.parsing, 6),
        (writer.rendering, 5),
        (writer.environment, 4),
        (writer.rebind, 3),
        (writer.decimal_local, 3),
        (writer.cross_module, 4),
        (writer.parametrized, 5),
        (writer.fixture_state, 3),
        (writer.class_group, 3),
    ]
    funcs = [f for f, _ in units]
    weights = [w for _, w in units]
    remaining = n_tests - (1 if idx == 0 else 0)
    if remaining > 0:
        remaining -= writer.tmp_file(remaining)
    while remaining > 0:
        remaining -= rng.choices(funcs, weights)[0](remaining)
    return writer.header() + "\n\n" + "\n\n".join(writer.parts)


def _conftest_source() -> str:
    return textwrap.dedent(
        f'''\
        """Session-wide setup: state a session fixture puts in place is part of the baseline."""

        import pytest

        from {PACKAGE} import m00


        @pytest.fixture(scope="session", autouse=True)
        def session_setting():
            m00.SETTINGS["session"] = "on"
            yield
            del m00.SETTINGS["session"]
        '''
    )


def generate(dest: Path, modules: int = 40, tests: int = 2000, seed: int = 0) -> Path:
    """Write the generated project into ``dest`` (replacing an earlier generation) and return it.

    Parameters:
        dest: target directory; must be empty, missing, or an earlier output of this function.
        modules: number of package modules (and test modules).
        tests: total number of test cases (parametrized cases count one each).
        seed: the output is a pure function of (modules, tests, seed).
    """
    if modules < 1 or modules > 999:
        raise GenError(f"--modules must be between 1 and 999, got {modules}")
    if tests < modules:
        raise GenError(f"--tests ({tests}) must be at least --modules ({modules})")
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise GenError(f"{dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).exists():
        raise GenError(f"{dest} is not empty and was not made by gen_suite; refusing to write")
    dest.mkdir(parents=True, exist_ok=True)
    for sub in (PACKAGE, "tests"):
        shutil.rmtree(dest / sub, ignore_errors=True)
    (dest / PACKAGE).mkdir()
    (dest / "tests").mkdir()

    rng = random.Random(seed)
    (dest / PACKAGE / "__init__.py").write_text(f'"""Generated package ({modules} modules)."""\n')
    for i in range(modules):
        (dest / PACKAGE / f"m{i:02d}.py").write_text(_module_source(i, modules, rng))
    per_module = [tests // modules + (1 if i < tests % modules else 0) for i in range(modules)]
    for i, n in enumerate(per_module):
        (dest / "tests" / f"test_m{i:02d}.py").write_text(_test_source(i, modules, n, rng))
    (dest / "tests" / "conftest.py").write_text(_conftest_source())
    (dest / "pytest.ini").write_text("[pytest]\npythonpath = .\ntestpaths = tests\n")
    meta = {"modules": modules, "tests": tests, "seed": seed}
    (dest / MARKER).write_text(json.dumps(meta, sort_keys=True) + "\n")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--modules", type=int, default=40)
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        out = generate(args.dest, args.modules, args.tests, args.seed)
    except (GenError, OSError) as exc:
        print(f"gen_suite: error: {exc}", file=sys.stderr)
        return 2
    print(f"generated {args.tests} tests over {args.modules} modules in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
