"""Fidelity: under ``--reset=minimal`` every test gets its isolated outcome, in any order.

Two suites with planted shared state are used, each described by its ``EXPECTED.json``:
``tests/data/statekinds`` (every kind of state isolator claims to reset) and the bundled
example ``examples/shop``.  A test's *isolated outcome* is its outcome alone in a fresh
interpreter (``python -m pytest NODEID``).  Every run happens in a fresh copy of the suite,
because the suites change files under their own directory.

Orders are given as explicit node ids on the command line; pytest keeps that order
(``test_pytest_keeps_node_id_argument_order``).  Outcomes come from ``--junitxml``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _orders
import pytest

REPO = Path(__file__).resolve().parent.parent
SUITES = {
    "statekinds": REPO / "tests" / "data" / "statekinds",
    "shop": REPO / "examples" / "shop",
}
SEEDS = (11, 22, 33, 44, 55)
ORDER_NAMES = ["forward", "reversed", *(f"random-{seed}" for seed in SEEDS)]


@dataclass
class Suite:
    """A planted suite with its manifest, declared order and isolated outcomes."""

    name: str
    src: Path
    workdir: Path
    manifest: dict[str, Any]
    nodeids: list[str]
    isolated: dict[str, str]

    @property
    def orders(self) -> dict[str, list[str]]:
        return _orders.named_orders(self.nodeids, SEEDS)

    @property
    def targets(self) -> dict[str, str]:
        """Planted victim/brittle node id -> the kinds of state it depends on."""
        kinds: dict[str, set[str]] = {}
        for dep in self.manifest["dependencies"]:
            kinds.setdefault(dep["target"], set()).add(f"{dep['state_kind']} {dep['state']}")
        return {target: ", ".join(sorted(k)) for target, k in kinds.items()}

    def explain(self, run: _orders.Run) -> str:
        """One line per test whose outcome in ``run`` is not its isolated one."""
        targets = self.targets
        return "\n".join(
            f"  {n}: isolated {self.isolated[n]}, got {run.outcomes[n]}"
            f"   [planted: {targets.get(n, 'nothing')}]"
            for n in _orders.differing(self.isolated, run)
        )


@pytest.fixture(scope="module", params=sorted(SUITES))
def suite(request: pytest.FixtureRequest) -> Iterator[Suite]:
    """Collect the suite and compute every test's isolated outcome, once per module run."""
    name: str = request.param
    src = SUITES[name]
    # Not tmp_path_factory: concurrent pytest sessions of the same user prune
    # /tmp/pytest-of-<user>/, and these copies live for the whole module.
    with tempfile.TemporaryDirectory(prefix=f"isolator-fidelity-{name}-") as tmp:
        workdir = Path(tmp)
        manifest = json.loads((src / "EXPECTED.json").read_text(encoding="utf-8"))
        nodeids = _orders.collect(src, workdir)
        isolated = _orders.isolated_outcomes(src, nodeids, workdir)
        yield Suite(name, src, workdir, manifest, nodeids, isolated)


@pytest.fixture
def planted_targets(suite: Suite) -> set[str]:
    return set(suite.targets)


def test_pytest_keeps_node_id_argument_order(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_a="def test_1(): pass\ndef test_2(): pass\nclass TestK:\n    def test_3(self): pass\n",
        test_b="def test_4(): pass\n",
    )
    order = [
        "test_a.py::TestK::test_3",
        "test_b.py::test_4",
        "test_a.py::test_2",
        "test_a.py::test_1",
    ]
    result = pytester.runpytest_subprocess(
        "-p", "no:isolator", "-p", "no:randomly", "--collect-only", "-q", *order
    )
    assert [line for line in result.outlines if "::" in line] == order


def test_isolated_outcomes_are_as_planted(suite: Suite) -> None:
    failing_alone = sorted(n for n, outcome in suite.isolated.items() if outcome != "passed")
    assert failing_alone == sorted(suite.manifest["isolated_failures"])
    assert set(suite.isolated.values()) <= {"passed", "failed"}


def test_declared_order_passes_under_plain_pytest(suite: Suite) -> None:
    # The planted dependencies are latent: the declared order hides them.
    run = _orders.run_order(suite.src, suite.nodeids, suite.workdir)
    assert run.returncode == 0, run.describe()
    assert set(run.outcomes.values()) == {"passed"}


def test_planted_edges_hold_under_plain_pytest(suite: Suite) -> None:
    """Each manifest entry is true of plain pytest: edges, cleaners, independent pairs."""
    expect: dict[tuple[str, ...], dict[str, str]] = {}  # order -> {test: planted outcome}
    for dep in suite.manifest["dependencies"]:
        source, target = dep["source"], dep["target"]
        if dep["kind"] == "polluter":
            expect[(source, target)] = {target: "failed"}
            for cleaner in dep["cleaners"]:
                expect[(source, cleaner, target)] = {target: "passed"}
        else:
            expect[(source, target)] = {target: "passed"}
    for a, b in suite.manifest["independent"]:
        expect[(a, b)] = expect[(b, a)] = {a: suite.isolated[a], b: suite.isolated[b]}
    runs = _orders.run_many(suite.src, list(expect), suite.workdir)
    wrong = [
        f"{' -> '.join(run.order)}: {test} {run.outcomes[test]}, planted {planted}"
        for run in runs
        for test, planted in expect[run.order].items()
        if run.outcomes[test] != planted
    ]
    assert not wrong, "\n".join(wrong)


def test_reversed_order_fails_under_plain_pytest(suite: Suite, planted_targets: set[str]) -> None:
    run = _orders.run_order(suite.src, suite.orders["reversed"], suite.workdir)
    changed = set(_orders.differing(suite.isolated, run))
    assert run.returncode != 0
    assert changed, "the reversed order should expose planted dependencies"
    # Nothing depends on anything that was not planted.
    assert changed <= planted_targets, sorted(changed - planted_targets)


@pytest.mark.parametrize("order_name", ORDER_NAMES)
def test_minimal_reset_gives_isolated_outcomes(suite: Suite, order_name: str) -> None:
    run = _orders.run_order(suite.src, suite.orders[order_name], suite.workdir, mode="minimal")
    wrong = _orders.differing(suite.isolated, run)
    assert not wrong, (
        f"{suite.name}, {order_name} order: {len(wrong)} test(s) differ from their isolated "
        f"outcome under --reset=minimal\n{suite.explain(run)}\n{run.describe()}"
    )
    # pytest's exit code follows the outcomes: 0 only when every test passes alone.
    all_pass = set(suite.isolated.values()) == {"passed"}
    assert (run.returncode == 0) == all_pass, run.describe()


def test_reset_none_shows_order_dependence(suite: Suite, planted_targets: set[str]) -> None:
    order = suite.orders["reversed"]
    run = _orders.run_order(suite.src, order, suite.workdir, mode="none")
    changed = set(_orders.differing(suite.isolated, run))
    assert changed and changed <= planted_targets, run.describe()
    # --reset=none is plain pytest: the same outcomes as without isolator.
    plain = _orders.run_order(suite.src, order, suite.workdir)
    assert run.outcomes == plain.outcomes, run.describe()
