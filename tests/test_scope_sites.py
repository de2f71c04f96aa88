"""Higher-scoped fixtures whose state lives inside containers, and slot-only objects: real
pytest runs in subprocesses.

The elements of a list or deque share their container's site name, so a fixture's
teardown must find the watch it changed by more than its name (the sweep found a crash,
``'list' object has no attribute 'get'``, and a list restored to one of its own rows).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

# Each shape: module source with two elements in a module-level container, ``mark(k)``
# changing element ``k`` in place, and ``state()`` giving one 0/1 marker per element.
SHAPES = {
    "nested_list": """
DATA = [[0, 0], [0, 0]]
def mark(k):
    DATA[k][0] = 1
def state():
    assert all(isinstance(row, list) and row[1:] == [0] for row in DATA), DATA
    return [row[0] for row in DATA]
""",
    "object_in_list": """
class Node:
    def __init__(self):
        self.flag = 0
DATA = [Node(), Node()]
def mark(k):
    DATA[k].flag = 1
def state():
    return [n.flag for n in DATA]
""",
    "dict_in_list": """
DATA = [{"v": 0}, {"v": 0}]
def mark(k):
    DATA[k]["v"] = 1
def state():
    return [d["v"] for d in DATA]
""",
    "list_in_deque": """
import collections
DATA = collections.deque([[0], [0]])
def mark(k):
    DATA[k][0] = 1
def state():
    return [x[0] for x in DATA]
""",
    "slotted_in_list": """
class Point:
    __slots__ = ("v", "w")
    def __init__(self):
        self.v = 0
        self.w = 0
DATA = [Point(), Point()]
def mark(k):
    DATA[k].v = 1
def state():
    return [p.v for p in DATA]
""",
}

RUN = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator")


def _fixture_files(scope: str) -> dict[str, str]:
    """test_1 and test_2 each change one element under a fixture of ``scope`` and expect
    exactly their own change; test_3 expects what is left once those are torn down."""
    if scope == "session":
        # A session fixture outlives the module fixture set up after it: its change stays.
        return {
            "conftest": (
                "import pytest, pkg\n"
                "@pytest.fixture(scope='session')\n"
                "def s():\n    pkg.mark(1)\n    yield\n"
            ),
            "test_1": (
                "import pytest, pkg\n"
                "@pytest.fixture(scope='module')\n"
                "def m():\n    pkg.mark(0)\n    yield\n"
                "def test_one(s, m):\n    assert pkg.state() == [1, 1]\n"
            ),
            "test_2": "import pkg\ndef test_two(s):\n    assert pkg.state() == [0, 1]\n",
            "test_3": "import pkg\ndef test_three(s):\n    assert pkg.state() == [0, 1]\n",
        }
    files = {}
    for n, k, want in (("1", 0, [1, 0]), ("2", 1, [0, 1])):
        if scope == "module":
            files[f"test_{n}"] = (
                "import pytest, pkg\n"
                "@pytest.fixture(scope='module')\n"
                f"def f():\n    pkg.mark({k})\n    yield\n"
                f"def test_{n}(f):\n    assert pkg.state() == {want}\n"
                f"def test_{n}_again(f):\n    assert pkg.state() == {want}\n"
            )
        else:
            files[f"test_{n}"] = (
                "import pytest, pkg\n"
                f"class TestC{n}:\n"
                "    @pytest.fixture(scope='class')\n"
                f"    def f(self):\n        pkg.mark({k})\n        yield\n"
                f"    def test_{n}(self, f):\n        assert pkg.state() == {want}\n"
                f"    def test_{n}_again(self, f):\n        assert pkg.state() == {want}\n"
            )
    files["test_3"] = "import pkg\ndef test_three():\n    assert pkg.state() == [0, 0]\n"
    return files


@pytest.mark.parametrize("mode", ["minimal", "full"])
@pytest.mark.parametrize("order", ["forward", "reversed"])
@pytest.mark.parametrize("scope", ["module", "class", "session"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_fixture_teardown_restores_the_element_it_changed(
    pytester: pytest.Pytester, shape: str, scope: str, order: str, mode: str
) -> None:
    pytester.makepyfile(pkg=SHAPES[shape], **_fixture_files(scope))
    files = ["test_1.py", "test_2.py"]
    if order == "reversed":
        files.reverse()
    result = pytester.runpytest_subprocess(*RUN, f"--reset={mode}", *files, "test_3.py")
    n = 3 if scope == "session" else 5
    result.assert_outcomes(passed=n)


SLOTS_PKG = """
class P:
    __slots__ = ("a", "b", "c")
    def __init__(self, a, b):
        self.a = a
        self.b = b          # c is left unset

class Full:
    __slots__ = ("x", "y")
    def __init__(self):
        self.x = 1
        self.y = [1]

class One:
    __slots__ = ("only",)
    def __init__(self):
        self.only = 1

PART = P(1, 7)
FULL = Full()
ONE = One()
MANY = [Full() for _ in range(50)]
"""

# Each pair: (polluting body, victim body); a clean test runs first so that the objects'
# fast check has been verified against the snapshots before anything changes.
SLOT_PAIRS = {
    "rebound": ("pkg.FULL.x = 2", "assert pkg.FULL.x == 1"),
    "rebound_in_list": ("pkg.MANY[37].y = None", "assert pkg.MANY[37].y == [1]"),
    "deleted": ("del pkg.FULL.x", "assert pkg.FULL.x == 1"),
    "one_slot_rebound": ("pkg.ONE.only = 2", "assert pkg.ONE.only == 1"),
    "one_slot_deleted": ("del pkg.ONE.only", "assert pkg.ONE.only == 1"),
    "unset_slot_set": ("pkg.PART.c = 3", "assert not hasattr(pkg.PART, 'c')"),
    "set_slot_deleted": ("del pkg.PART.a", "assert pkg.PART.a == 1"),
    # The same values in other slots: only a per-slot comparison tells.
    "moved_to_unset_slot": (
        "del pkg.PART.b; pkg.PART.c = 7",
        "assert pkg.PART.b == 7 and not hasattr(pkg.PART, 'c')",
    ),
}


@pytest.mark.parametrize("mode", ["minimal", "full"])
def test_slot_only_objects_are_put_back(pytester: pytest.Pytester, mode: str) -> None:
    body = "import pkg\n\ndef test_clean_first():\n    pass\n"
    for name, (pollute, check) in SLOT_PAIRS.items():
        body += f"\ndef test_{name}_polluter():\n    {pollute}\n"
        body += f"\ndef test_{name}_victim():\n    {check}\n"
        body += f"\ndef test_{name}_clean():\n    pass\n"
    pytester.makepyfile(pkg=SLOTS_PKG, test_slots=body)
    result = pytester.runpytest_subprocess(*RUN, f"--reset={mode}")
    result.assert_outcomes(passed=1 + 3 * len(SLOT_PAIRS))


@pytest.mark.parametrize("mode", ["minimal", "full"])
def test_slot_values_set_by_a_module_fixture_are_undone_at_its_teardown(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makepyfile(
        pkg=SLOTS_PKG,
        test_1="""
import pytest, pkg
@pytest.fixture(scope="module")
def f():
    pkg.FULL.x = 5
    del pkg.PART.a
    pkg.PART.c = 9
    yield
def test_one(f):
    assert (pkg.FULL.x, hasattr(pkg.PART, "a"), pkg.PART.c) == (5, False, 9)
    pkg.FULL.x = 6
def test_two(f):
    assert (pkg.FULL.x, hasattr(pkg.PART, "a"), pkg.PART.c) == (5, False, 9)
""",
        test_2="""
import pkg
def test_three():
    assert (pkg.FULL.x, pkg.PART.a, hasattr(pkg.PART, "c")) == (1, 1, False)
""",
    )
    result = pytester.runpytest_subprocess(*RUN, f"--reset={mode}", "test_1.py", "test_2.py")
    result.assert_outcomes(passed=3)
