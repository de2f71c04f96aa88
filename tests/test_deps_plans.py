"""The confirmation's plan runner (``--isolator-plan``): each sequence of a plan must
start as in a fresh process, whatever the sequences before it left, fixtures included."""

from __future__ import annotations

import json

import pytest

PLAN_ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator",
             "-p", "no:isolator-sched", "--reset=minimal")  # fmt: skip

# Two classes build one directory in setup_class and remove it in teardown_class, as
# wcmatch's tests/test_glob.py does.  Every test passes alone and in any order.
SHARED_DIR = """
import os
import shutil

D = "shared_dir"


class Base:
    files = ()

    @classmethod
    def setup_class(cls):
        os.makedirs(D, exist_ok=True)
        for f in cls.files:
            open(os.path.join(D, f), "w").close()

    @classmethod
    def teardown_class(cls):
        shutil.rmtree(D)


class TestA(Base):
    files = ("x",)

    def test_a(self):
        assert sorted(os.listdir(D)) == ["x"]


class TestB(Base):
    files = ("x", "y")

    def test_b1(self):
        assert sorted(os.listdir(D)) == ["x", "y"]

    def test_b2(self):
        assert sorted(os.listdir(D)) == ["x", "y"]
"""

# test_needs fails alone: it passes only after TestA::test_sets.
MODULE_STATE = """
import mod


class TestA:
    def test_sets(self):
        mod.FLAGS.append("on")


class TestB:
    @classmethod
    def setup_class(cls):
        cls.ready = True

    def test_reads(self):
        assert self.ready

    def test_needs(self):
        assert mod.FLAGS == ["on"]
"""


def run_plan(pytester: pytest.Pytester, name: str, seqs: list[list[str]]) -> list[list[str]]:
    plan = pytester.path / "plan.json"
    out = pytester.path / "out.jsonl"
    ids = [[f"{name}.py::{t}" for t in seq] for seq in seqs]
    plan.write_text(json.dumps({"sequences": ids}), encoding="utf-8")
    result = pytester.runpytest_subprocess(
        *PLAN_ARGS, f"--isolator-plan={plan}", f"--isolator-plan-out={out}", f"{name}.py"
    )
    assert result.ret in (0, 1), result.stdout.str()
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    got = {line["id"]: line for line in lines if line["type"] == "result"}
    assert [got[i]["tests"] for i in range(len(ids))] == ids
    return [got[i]["outcomes"] for i in range(len(ids))]


def test_a_class_set_up_after_another_classs_test_does_not_outlive_its_sequence(
    pytester: pytest.Pytester,
) -> None:
    # TestA's teardown gave its journal entries (the directory, x: absent before) back to
    # the sequence, so TestB's setup_class did not save them again: the reset after the
    # sequence removed the directory under the TestB that stayed set up for the next
    # sequence, and test_b2 "failed alone" (wcmatch: 141 of 156 candidates dropped as
    # non-deterministic).
    pytester.makepyfile(test_shared=SHARED_DIR)
    outcomes = run_plan(
        pytester, "test_shared", [["TestA::test_a", "TestB::test_b1"], ["TestB::test_b2"]]
    )
    assert outcomes == [["passed", "passed"], ["passed"]]
    assert not (pytester.path / "shared_dir").exists()


def test_module_state_of_a_kept_test_is_not_taken_into_a_later_classs_baseline(
    pytester: pytest.Pytester,
) -> None:
    # TestB's class fixture was set up while test_sets' write was kept: the core took the
    # dirty module state into the fixture's baseline, and test_needs "passed alone" in the
    # next sequence (it fails alone in a fresh process).
    pytester.makepyfile(mod="FLAGS = []\n", test_mod=MODULE_STATE)
    pytester.makeini("[pytest]\npythonpath = .\n")
    outcomes = run_plan(
        pytester, "test_mod", [["TestA::test_sets", "TestB::test_reads"], ["TestB::test_needs"]]
    )
    assert outcomes == [["passed", "passed"], ["failed"]]
