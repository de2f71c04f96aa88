"""``same_value``: when a recomputed memo value counts as the same one (learn_memo)."""

from __future__ import annotations

import decimal
import functools
import gc
import sys
import textwrap
import types

import pytest

from isolator._same import same_value


class Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.out: dict[str, Node] = {}
        self.members: set[Leaf] = set()


class Leaf:
    def __init__(self, v: int) -> None:
        self.v = v


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a: object, b: object) -> None:
        self.a, self.b = a, b


def machine(n: int, order: list[int] | None = None) -> list[Node]:
    """A cyclic graph of n states; ``order`` permutes the list the states come in."""
    nodes = [Node(f"s{i}") for i in range(n)]
    for i, node in enumerate(nodes):
        node.out["next"] = nodes[(i + 1) % n]
        node.out["self"] = node
        node.members = {Leaf(i), Leaf(i + 1)}
    return [nodes[i] for i in (order or range(n))]


def test_isomorphic_cyclic_graphs_are_the_same() -> None:
    assert same_value(machine(50), machine(50))


def test_object_order_in_lists_and_sets_does_not_matter() -> None:
    assert same_value(machine(6), machine(6, [0, 3, 1, 5, 2, 4]))
    a, b = Leaf(1), Leaf(2)
    c, d = Leaf(1), Leaf(2)
    assert same_value({a: "x", b: "y"}, {d: "y", c: "x"})


def test_dicts_keyed_by_objects_pair_keys_and_values() -> None:
    a, b = Leaf(1), Leaf(2)
    c, d = Leaf(1), Leaf(2)
    assert not same_value({a: "x", b: "y"}, {c: "y", d: "x"})


def test_a_changed_atom_deep_inside_makes_it_different() -> None:
    left, right = machine(30), machine(30)
    right[17].out["next"].name = "other"
    assert not same_value(left, right)


def test_a_rewired_edge_makes_it_different() -> None:
    left, right = machine(8), machine(8)
    right[3].out["next"] = right[5]
    assert not same_value(left, right)


def test_atoms_in_lists_keep_their_order() -> None:
    assert not same_value([1, 2, 3], [3, 2, 1])
    assert same_value([1, Leaf(2)], [1, Leaf(2)])
    assert not same_value([1, Leaf(2)], [Leaf(2), 1])


def test_tuples_keep_their_order() -> None:
    assert not same_value((Leaf(1), Leaf(2)), (Leaf(2), Leaf(1)))


def test_shared_objects_map_to_themselves() -> None:
    shared = Leaf(1)
    copy = Leaf(1)
    assert same_value([shared, Leaf(2)], [shared, Leaf(2)])
    # The same structure, but one value holds the shared object where the other holds a
    # copy of it and the shared object elsewhere.
    assert not same_value([shared, copy], [copy, shared])


def test_slots_defaults_and_leaves_with_their_own_equality() -> None:
    assert same_value(Slotted(1, [Leaf(3)]), Slotted(1, [Leaf(3)]))
    assert not same_value(Slotted(1, 2), Slotted(1, 3))
    assert same_value(decimal.Decimal("1.5"), decimal.Decimal("1.50"))
    assert not same_value(functools.partial(int, "1"), functools.partial(float, "1"))
    assert not same_value(object(), object())


class _HalfSet:
    __slots__ = ("value", "lazy")  # ``lazy`` is set only once computed

    def __init__(self, value: object) -> None:
        self.value = value


def test_unset_slots_of_several_objects_are_the_same() -> None:
    # Two unset slots in one value (babel's plural rules): both pair "unset" with "unset".
    assert same_value([_HalfSet([]), _HalfSet([])], [_HalfSet([]), _HalfSet([])])
    one_set = _HalfSet([])
    one_set.lazy = 1
    assert not same_value([_HalfSet([]), one_set], [_HalfSet([]), _HalfSet([])])


def test_dicts_pair_values_by_key() -> None:
    assert same_value({"a": 1, "b": Leaf(2)}, {"b": Leaf(2), "a": 1})
    assert not same_value({"a": 1, "b": 2}, {"a": 1, "b": 3})
    assert not same_value({"a": 1, "b": 2}, {"a": 1, "c": 2})
    assert not same_value({"a": 1}, {"a": True})


def test_lists_of_atoms_compare_item_by_item() -> None:
    assert same_value([1, "a", None, 2.5], [1, "a", None, 2.5])
    assert not same_value([1, 2, 3], [1, 3, 2])
    assert not same_value([1, True], [1, 1])


def test_list_members_paired_elsewhere_match_as_a_multiset() -> None:
    a, b, c, d = Leaf(1), Leaf(1), Leaf(1), Leaf(1)
    assert same_value((a, b, [a, b, a]), (c, d, [d, c, c]))
    # The same members, but not as often.
    assert not same_value((a, b, [a, a, b]), (c, d, [c, d, d]))
    assert not same_value([a, a], [c, d])


def test_dict_keys_paired_elsewhere_pair_their_values() -> None:
    k1, k2, c1, c2 = Leaf(1), Leaf(2), Leaf(1), Leaf(2)
    assert same_value((k1, k2, {k1: "x", k2: "y"}), (c1, c2, {c2: "y", c1: "x"}))
    assert not same_value((k1, k2, {k1: "x", k2: "y"}), (c1, c2, {c1: "y", c2: "x"}))
    assert not same_value((k1, k2, {k1: "x"}), (c1, c2, {c2: "x"}))


class SlotsAndDict:
    __slots__ = ("s", "__dict__")

    def __init__(self, s: object, d: object) -> None:
        self.s, self.d = s, d


class Proxy:
    """Answers ``__class__`` with its target's class, as mocks and proxies do."""

    def __init__(self, target: object) -> None:
        self.target = target

    @property
    def __class__(self) -> type:
        return type(self.target)


def test_slots_and_a_dict_both_pair() -> None:
    assert same_value(SlotsAndDict(1, 2), SlotsAndDict(1, 2))
    assert not same_value(SlotsAndDict(1, 2), SlotsAndDict(2, 2))
    assert not same_value(SlotsAndDict(1, 2), SlotsAndDict(1, 3))


def test_each_proxy_pairs_as_what_isinstance_makes_of_it() -> None:
    assert same_value((Proxy(Leaf(1)), Proxy(Leaf(2))), (Proxy(Leaf(1)), Proxy(Leaf(2))))
    # The second one is an int to isinstance(): compared with ``==`` (by identity here),
    # not as an object with attributes like the first.
    assert not same_value((Proxy(Leaf(1)), Proxy(5)), (Proxy(Leaf(1)), Proxy(5)))


def test_a_class_built_twice_by_one_factory_is_the_same() -> None:
    class Base:
        pass

    def factory(extra: int, name: str = "Made") -> type:
        return type(name, (Base,), {"rules": {"a": [1, extra]}, "doc": "made"})

    assert same_value(factory(2), factory(2))
    assert same_value([factory(2), Base], [factory(2), Base])
    assert not same_value(factory(2), factory(3))  # another namespace
    assert not same_value(factory(2), factory(2, name="Other"))  # another name
    assert not same_value(factory(2), Base)
    other = type("Made", (object,), {"rules": {"a": [1, 2]}, "doc": "made"})
    assert not same_value(factory(2), other)  # other bases
    assert not same_value(int, float)  # built-in types: identity only

    def defined() -> type:
        class Schema(Base):  # a class statement in a function: the test's own class
            fields = ["a"]

        return Schema

    assert not same_value(defined(), defined())


def test_classes_and_functions_a_function_of_the_memos_module_defines_pair() -> None:
    # A memo function that builds classes and closures on each call (html5lib's parser
    # phases): made twice, they are the same value when that function is code of the
    # memo's own module (``home``), and only then.
    def phases(flag: int) -> dict[str, object]:
        def log(fn):  # type: ignore[no-untyped-def]
            def wrapped(*args):  # type: ignore[no-untyped-def]
                return fn(*args)

            return wrapped

        class Phase:
            __slots__ = ("parser",)

            def process(self, token: object) -> object:
                return super().__repr__(), flag, token

        class Initial(Phase):
            __slots__ = ()
            handler = log(Phase.process)

            def start(self, x: list[int] = [1, 2]) -> list[int]:  # noqa: B006
                return x

        return {"initial": Initial, "base": Phase, "log": log}

    home = __name__
    assert same_value(phases(1), phases(1), home=home)
    assert not same_value(phases(1), phases(1))  # a class statement of unknown code
    assert not same_value(phases(1), phases(1), home="elsewhere")
    assert not same_value(phases(1), phases(2), home=home)  # a closure's value differs
    a, b = phases(1), phases(1)
    b["initial"].start.__defaults__ = ([1, 3],)  # type: ignore[attr-defined]
    assert not same_value(a, b, home=home)
    a, b = phases(1), phases(1)
    b["initial"].start.__dict__["marked"] = True  # type: ignore[attr-defined]
    assert not same_value(a, b, home=home)

    def one() -> object:
        def f() -> int:
            return 1

        return f

    def another() -> object:
        def f() -> int:
            return 1

        return f

    assert same_value(one(), one(), home=home)
    assert not same_value(one(), another(), home=home)  # two definitions: two codes

    def module(label: str) -> types.ModuleType:
        made = types.ModuleType("_made_factory")

        class Node:
            def _get(self) -> str:
                return label

            name = property(_get)
            build = staticmethod(lambda: Node())
            alt = classmethod(lambda cls: cls)

        made.Node = Node  # type: ignore[attr-defined]
        return made

    assert same_value(module("a"), module("a"), home=home)
    assert not same_value(module("a"), module("b"), home=home)
    assert not same_value(module("a"), module("a"))
    assert not same_value(types, functools, home=home)  # imported modules: identity only


def test_the_collector_is_left_as_it_was() -> None:
    assert gc.isenabled()
    assert same_value(machine(5), machine(5))
    assert gc.isenabled()
    gc.disable()
    try:
        assert not same_value(machine(5), machine(6))
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="id() is the identity there")
def test_the_check_raises_no_audit_events(pytester: pytest.Pytester) -> None:
    """A Python audit hook (the file journal's) would run for every ``id()`` call."""
    script = textwrap.dedent(
        """
        import sys
        from isolator._same import same_value

        class State:
            def __init__(self, i):
                self.i, self.out, self.nfa = i, [], {object()}

        def states(order):
            nodes = [State(i) for i in range(20)]
            for node in nodes:
                node.out.append(nodes[(node.i + 1) % 20])
            return [nodes[i] for i in order]

        events = []
        sys.addaudithook(lambda event, args: events.append(event))
        assert same_value(states(range(20)), states(range(19, -1, -1)))
        print("EVENTS", events)
        """
    )
    result = pytester.runpython_c(script)
    result.stdout.fnmatch_lines(["EVENTS []"])


def test_deep_chains_do_not_recurse() -> None:
    def chain(n: int) -> Node:
        head = node = Node("0")
        for i in range(1, n):
            nxt = Node(str(i))
            node.out["next"] = nxt
            node = nxt
        return head

    assert same_value(chain(20000), chain(20000))


def test_the_budget_bounds_the_work() -> None:
    assert not same_value(machine(200), machine(200), budget=100)


@pytest.mark.parametrize("learn", [True, False])
def test_a_grammar_like_memo_is_learned(pytester: pytest.Pytester, learn: bool) -> None:
    """A memo dict of graphs holding identity-hashed sets is kept once a second test
    recomputed its entry the same; with ``learn_memo = false`` every test recomputes it."""
    pytester.makepyprojecttoml(f"[tool.isolator]\nlearn_memo = {str(learn).lower()}\n")
    pytester.makepyfile(
        grammar=textwrap.dedent(
            """
            CACHE = {}

            class State:
                def __init__(self, i):
                    self.i = i
                    self.arcs = {}
                    self.nfa = {object() for _ in range(3)}

            def load(name):
                try:
                    return CACHE[name], True
                except KeyError:
                    states = [State(i) for i in range(20)]
                    for s in states:
                        s.arcs["a"] = states[(s.i * 7) % 20]
                    return CACHE.setdefault(name, states), False
            """
        )
    )
    pytester.makepyfile(
        test_g="import grammar\n\n"
        + "".join(
            f"def test_{i}():\n"
            "    states, cached = grammar.load('py')\n"
            f"    print('CACHED-{i}', cached)\n"
            "    assert len(states) == 20\n"
            for i in range(5)
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "isolator", "-p", "no:randomly", "--reset=minimal", "-s"
    )
    result.assert_outcomes(passed=5)
    out = result.stdout.str()
    for i in range(5):
        cached = learn and i >= 2
        assert f"CACHED-{i} {cached}" in out
    if learn:
        assert "kept 1 memo entry" in out and "grammar:CACHE['py']" in out
    else:
        assert "memo entr" not in out


class Pattern(functools.partial):  # type: ignore[type-arg]
    """A stand-in for a compiled pattern whose type compares by identity (the ``regex``
    module's): state in C (a subclass of a C type), the source and flags as attributes."""

    def __new__(cls, pattern: str, flags: int = 0) -> Pattern:
        self = super().__new__(cls, print)
        self.pattern = pattern
        self.flags = flags
        return self


def test_compiled_patterns_from_the_same_source_and_flags_are_the_same() -> None:
    a, b = Pattern("(a|b)c", 2), Pattern("(a|b)c", 2)
    assert a != b
    assert same_value({"en": a}, {"en": b})
    assert not same_value({"en": a}, {"en": Pattern("(a|b)c", 0)})
    assert not same_value({"en": a}, {"en": Pattern("(a|b)d", 2)})


def test_builtin_methods_pair_by_name_and_the_object_they_are_bound_to() -> None:
    """A token table holding ``pattern.match`` (pygments' lexers): recompiled after the
    pattern cache was emptied, each method is bound to a new, equal pattern."""
    import re

    first = {"root": [(re.compile(r"\d+").match, "num")]}
    re.purge()
    again = {"root": [(re.compile(r"\d+").match, "num")]}
    assert first["root"][0][0] is not again["root"][0][0]
    assert same_value(first, again)
    assert not same_value(first, {"root": [(re.compile(r"\d+").search, "num")]})
    assert not same_value(first, {"root": [(re.compile(r"\d*").match, "num")]})
    # Bound to containers: those pair structurally; functions of a module by identity.
    assert same_value([{1: 2}.get], [{1: 2}.get])
    assert not same_value([{1: 2}.get], [{1: 3}.get])
    assert same_value([len], [len])
    assert not same_value([len], [abs])
