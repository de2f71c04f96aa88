"""The recording run's default tracer backend: probes put into the project's bytecode."""

from __future__ import annotations

import dis
import sys
import textwrap
import traceback
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from isolator import _tracer

pytestmark = pytest.mark.skipif(
    not _tracer.PROBES_SUPPORTED, reason="bytecode probes need Python 3.11+"
)

SOURCE = '''
def simple(a, b=2):
    """Docstring stays first."""
    return a + b


def loop_first(n):
    while n > 0:
        n -= 1
    return n


def gen(n):
    for i in range(n):
        yield i * 2


def closure(x):
    def inner(y):
        return x + y
    return inner


def guarded(x):
    try:
        return 1 / x
    except ZeroDivisionError:
        return "zero"
    finally:
        pass


def raiser():
    x = 1
    raise ValueError(x)


def comprehensions(xs):
    return [x * 2 for x in xs], sum(x for x in xs)


def local_class():
    class C:
        a = 1

        def m(self):
            return self.a
    return C().m()


lam = lambda q: q * 3


def many_constants():  # constant indexes above 255 need EXTENDED_ARG
    return [STRINGS][-1]


def never_called():
    return 0
'''.replace("STRINGS", ", ".join(f"'s{i}'" for i in range(300)))


@pytest.fixture
def module(tmp_path: Path) -> Iterator[tuple[types.ModuleType, _tracer.ProbeBackend]]:
    path = tmp_path / "probed.py"
    path.write_text(SOURCE)
    mod = types.ModuleType("probed")
    mod.__file__ = str(path)
    exec(compile(SOURCE, str(path), "exec"), mod.__dict__)
    sys.modules["probed"] = mod
    backend = _tracer.ProbeBackend(lambda f: f == str(path))
    try:
        backend.instrument()
        yield mod, backend
    finally:
        backend.close()
        del sys.modules["probed"]


def _ran(backend: _tracer.ProbeBackend) -> set[str]:
    return {backend.units[k][0].co_name for k in backend.hits}


def test_probed_functions_behave_and_report_that_they_ran(
    module: tuple[types.ModuleType, _tracer.ProbeBackend],
) -> None:
    m, backend = module
    backend.start()
    assert m.simple(1) == 3
    assert m.loop_first(5) == 0
    assert list(m.gen(3)) == [0, 2, 4]
    assert m.closure(1)(2) == 3
    assert (m.guarded(0), m.guarded(2)) == ("zero", 0.5)
    assert m.comprehensions([1, 2]) == ([2, 4], 3)
    assert m.local_class() == 1
    assert m.lam(2) == 6
    assert m.many_constants() == "s299"
    assert m.simple.__doc__ == "Docstring stays first."
    assert _ran(backend) == {
        "simple", "loop_first", "gen", "closure", "inner", "guarded", "comprehensions",
        "local_class", "m", "<lambda>", "many_constants",
    }  # fmt: skip
    assert backend.stats["failed"] == 0


def test_tracebacks_and_line_numbers_are_unchanged(
    module: tuple[types.ModuleType, _tracer.ProbeBackend],
) -> None:
    m, _backend = module
    with pytest.raises(ValueError) as info:
        m.raiser()
    frames = traceback.extract_tb(info.tb)
    assert frames[-1].name == "raiser"
    assert frames[-1].line == "raise ValueError(x)"


def test_a_unit_holds_the_code_that_runs_only_inside_it(
    module: tuple[types.ModuleType, _tracer.ProbeBackend],
) -> None:
    _m, backend = module
    units = {u[0].co_name: [c.co_name for c in u[1:]] for u in backend.units}
    if sys.version_info < (3, 12):  # PEP 709 inlines list comprehensions from 3.12 on
        assert units["comprehensions"] == ["<listcomp>", "<genexpr>"]
    else:
        assert units["comprehensions"] == ["<genexpr>"]
    assert units["local_class"] == ["C"]


def test_close_restores_the_original_code(
    module: tuple[types.ModuleType, _tracer.ProbeBackend],
) -> None:
    m, backend = module
    probed = m.simple.__code__
    backend.close()
    assert m.simple.__code__ is not probed
    assert len(m.simple.__code__.co_code) < len(probed.co_code)


def test_location_table_insertion_keeps_every_position() -> None:
    code = compile(textwrap.dedent(SOURCE), "x.py", "exec")
    nop = dis.opmap["NOP"]
    todo = [code]
    while todo:
        c = todo.pop()
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        before = list(c.co_positions())
        for at in range(1, len(c.co_code) // 2):
            raw = c.co_code[: 2 * at] + bytes([nop, 0]) * 9 + c.co_code[2 * at :]
            table = _tracer._insert_linetable(c.co_linetable, at, 9)
            after = list(c.replace(co_code=raw, co_linetable=table).co_positions())
            assert after[:at] + after[at + 9 :] == before
            assert after[at : at + 9] == [(None, None, None, None)] * 9
