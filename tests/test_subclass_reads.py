"""The recording run's reads of a base class's attributes, as the test's class sees them."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from isolator import _tracer


@pytest.fixture
def classes() -> Iterator[types.ModuleType]:
    mod = types.ModuleType("subclass_reads_mod")
    exec(
        "class Base:\n"
        "    pass\n"
        "class Mid(Base):\n"
        "    pass\n"
        "class Sub(Mid):\n"
        "    class Inner:\n"
        "        pass\n"
        "class Other:\n"
        "    pass\n"
        "def make():\n"
        "    class Local(Sub):\n"
        "        pass\n"
        "    return Local\n",
        mod.__dict__,
    )
    sys.modules[mod.__name__] = mod
    try:
        yield mod
    finally:
        del sys.modules[mod.__name__]


def test_a_base_attribute_is_read_under_each_class_of_the_mro_before_it(
    classes: types.ModuleType,
) -> None:
    m = "subclass_reads_mod:"
    reads = [
        m + "Base.mode",  # cls.mode in a classmethod of Base
        m + "Base.opts['k'].x",
        m + "Mid.tmp",
        m + "Sub.own",  # already the test's class
        m + "Other.x",  # not a base of it
        m + "Base",  # the class itself, not an attribute
        m + "Sub.Inner.flag",  # a nested class is no base of Sub
        m + "nothing.here",
        "<env>:HOME",
        "no_such_module:Base.mode",
    ]
    got = _tracer.SubclassReads().sites(reads, classes.Sub)
    assert got == {
        m + "Sub.mode",
        m + "Mid.mode",
        m + "Sub.opts['k'].x",
        m + "Mid.opts['k'].x",
        m + "Sub.tmp",
    }
    assert _tracer.SubclassReads().sites(reads, None) == set()
    # A class made in a function has no site name of its own; the others of its MRO do.
    local = classes.make()
    assert _tracer.SubclassReads().sites([m + "Base.mode"], local) == {
        m + "Sub.mode",
        m + "Mid.mode",
    }
