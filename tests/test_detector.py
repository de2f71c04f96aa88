"""The detector's pure stages (candidates, plans, verdicts, graph) and the output formats,
without running pytest inside pytest."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from isolator import _deps_cli, _graphout, detector
from isolator._store import save_graph
from isolator._types import Cleaners, Dependency, DependencyGraph
from isolator.detector import Candidate, CandidateIndex, Evidence
from isolator.detector import TestRecord as Record  # not a test class for pytest


def rec(
    nodeid: str,
    index: int,
    reads: tuple[str, ...] = (),
    writes: dict[str, str] | None = None,
    touched: tuple[str, ...] = (),
    outcome: str = "passed",
    scoped: dict[str, str] | None = None,
) -> Record:
    return Record(
        nodeid=nodeid,
        reads=frozenset(reads),
        writes=writes or {},
        touched=frozenset(touched),
        outcome=outcome,
        duration=0.001,
        index=index,
        scoped_writes=scoped or {},
    )


def pairs(cands: list[Candidate]) -> set[tuple[str, str]]:
    return {(c.source, c.target) for c in cands}


# ------------------------------------------------------------------------------ overlap


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("m:X", "m:X['k']", True),
        ("m:X['k']", "m:X", True),
        ("m:X", "m:X.attr", True),
        ("m:X['a']", "m:X['b']", False),
        ("m:X", "m:X1", False),
        ("<env>", "<env>:HOME", True),
        ("<env>:HOME", "<env>:PATH", False),
        ("<file>:/d", "<file>:/d/x.txt", True),
        ("<file>:/d", "<file>:/dx", False),
        ("<logging>:a", "<logging>:a.b", True),
        ("<sys.modules>:six", "<sys.modules>:six.moves", True),
        ("<cwd>", "<cwd>", True),
        ("<cwd>", "<random>", False),
    ],
)
def test_sites_overlap(a: str, b: str, expected: bool) -> None:
    assert detector.sites_overlap(a, b) is expected
    assert detector.sites_overlap(b, a) is expected


def test_overlapping_sites_share_a_root() -> None:
    for a, b in [("m:X", "m:X['k'].a"), ("<env>", "<env>:X"), ("<file>:/d", "<file>:/d/e")]:
        assert detector.site_root(a) == detector.site_root(b)
    assert detector.site_root("m:X") != detector.site_root("m:X1")


# --------------------------------------------------------------------------- candidates


def test_candidates_in_both_directions_of_the_run_order() -> None:
    victim = rec("t.py::victim", 0, reads=("m:CONFIG['mode']",))
    polluter = rec("t.py::polluter", 1, writes={"m:CONFIG['mode']": "m.py:3"})
    cands = detector.find_candidates([victim, polluter])
    # The polluter ran after the victim, yet the pair is a candidate.
    assert pairs(cands) == {("t.py::polluter", "t.py::victim")}
    (c,) = cands
    assert c.state == ("m:CONFIG['mode']",)
    assert c.written_at == ("m.py:3",)
    assert c.precise


def test_different_keys_of_one_dict_are_not_linked() -> None:
    a = rec("t.py::a", 0, reads=("m:S['currency']",), writes={"m:S['region']": ""})
    b = rec("t.py::b", 1, reads=("m:S['region']",), writes={"m:S['currency']": ""})
    c = rec("t.py::c", 2, reads=("m:S['other']",))
    assert pairs(detector.find_candidates([a, b, c])) == {
        ("t.py::a", "t.py::b"),
        ("t.py::b", "t.py::a"),
    }


def test_a_test_is_not_its_own_candidate_and_whole_reads_rank_last() -> None:
    a = rec("t.py::a", 0, reads=("<env>:X",), writes={"<env>:X": ""})
    b = rec("t.py::b", 1, reads=("<env>",))  # iterated the whole environment
    c = rec("t.py::c", 2, reads=("<env>:X",))
    cands = detector.find_candidates([a, b, c])
    assert pairs(cands) == {("t.py::a", "t.py::b"), ("t.py::a", "t.py::c")}
    by_target = {x.target: x for x in cands}
    assert by_target["t.py::c"].precise and not by_target["t.py::b"].precise
    assert cands[0].target == "t.py::c"


def test_writes_of_higher_scoped_fixtures_count_for_their_users() -> None:
    user = rec("t.py::uses_fixture", 0, scoped={"m:S['db']": "t.py:5"})
    reader = rec("u.py::reads_db", 1, reads=("m:S",))
    (c,) = detector.find_candidates([user, reader])
    assert (c.source, c.target, c.written_at) == (
        "t.py::uses_fixture",
        "u.py::reads_db",
        ("t.py:5",),
    )


@pytest.mark.parametrize(
    ("site", "parent"),
    [
        ("m:X", None),
        ("m:X['a']", "m:X"),
        ("m:X['a']['b']", "m:X['a']"),
        ("m.sub:X.attr.deep", "m.sub:X.attr"),
        ("m:X['a.b[c']", "m:X"),
        ('m:X["it\'s"].y', 'm:X["it\'s"]'),
        ("<env>:HOME", None),
        ("<file>:/tmp/a.b", None),
    ],
)
def test_parent_site(site: str, parent: str | None) -> None:
    assert detector.parent_site(site) == parent


def test_a_failed_test_writes_what_its_code_writes_and_stores_read_their_containers() -> None:
    # sched_suite's chain: register creates PLUGINS['audit'], enable (fails alone) stores
    # into it, enabled reads the flag enable sets.
    register = rec("t.py::register", 0, writes={"m:P['audit']": "t.py:5"})
    enable = dataclasses.replace(
        rec("t.py::enable", 1, touched=("m:P['audit']['on']",), outcome="failed"),
        touched_at={"m:P['audit']['on']": "t.py:9"},
    )
    enabled = rec("t.py::enabled", 2, reads=("m:P['audit']['on']",), outcome="failed")
    # Stores into other entries of P neither depend on register nor on each other.
    other = rec("t.py::other", 3, writes={"m:P['x']['y']": ""})
    found = detector.find_candidates([register, enable, enabled, other])
    cands = {(c.source, c.target): c for c in found}
    assert set(cands) == {
        ("t.py::register", "t.py::enable"),
        ("t.py::register", "t.py::enabled"),
        ("t.py::enable", "t.py::enabled"),
    }
    assert cands[("t.py::enable", "t.py::enabled")].written_at == ("t.py:9",)
    # A test that passed is a writer through its net writes only.
    assert detector.find_candidates([rec("t.py::a", 0, touched=("m:S",)),
                                     rec("t.py::b", 1, reads=("m:S",))]) == []  # fmt: skip


def test_ordering_tries_same_file_and_nearest_writers_first() -> None:
    # Ten tests of another file write the shared site before the nearby polluter does.
    far = [rec(f"a.py::w{i}", i, writes={"m:C['k']": ""}) for i in range(10)]
    victim = rec("z.py::victim", 10, reads=("m:C['k']",))
    near = rec("z.py::near", 12, writes={"m:C['k']": ""})
    other = rec("z.py::other", 11, reads=("m:D",), writes={"m:D": ""})
    index = CandidateIndex([*far, victim, other, near])
    order = [(c.source, c.target) for c in index.ordered()]
    assert order[0] == ("z.py::near", "z.py::victim")
    assert index.count() == len(order) == 11
    assert index.writers_of("z.py::victim", ["m:C['k']"])[:2] == ["a.py::w0", "a.py::w1"]


def test_every_writer_of_a_rare_site_comes_before_the_second_of_a_common_one() -> None:
    # Twenty tests of one class each write the class fixture's site (as a class-scoped
    # fixture's writes are every test's); the brittle test also reads an attribute that
    # only two tests set, its setter two tests before it and another test right after.
    common = {"m:Base.tmp": ""}
    records = [rec(f"t.py::c{i}", i, reads=("m:Base.tmp",), writes=common) for i in range(20)]
    records += [
        rec("t.py::setter", 20, reads=("m:Base.tmp",), writes={**common, "m:Sub.mode": ""}),
        rec("t.py::filler", 21, reads=("m:Base.tmp",), writes=common),
        rec("t.py::brittle", 22, reads=("m:Base.tmp", "m:Sub.mode"), writes=common),
        rec("t.py::resetter", 23, reads=("m:Base.tmp",), writes={**common, "m:Sub.mode": ""}),
    ]
    records += [rec(f"t.py::d{i}", 24 + i, reads=("m:Base.tmp",), writes=common) for i in range(20)]
    order = [(c.source, c.target) for c in CandidateIndex(records).ordered()]
    at = order.index(("t.py::setter", "t.py::brittle"))
    # Before the nearest writers of the common site of most tests, not after all of them.
    assert at < 10, at
    assert len(order) == len(set(order)) == 44 * 43


def test_cleaner_candidates_use_gross_writes() -> None:
    records = [
        rec("t.py::victim", 0, reads=("m:S['x']",)),
        rec("t.py::polluter", 1, writes={"m:S['x']": ""}),
        # Resets S to its default: no net write, but its code writes S.
        rec("t.py::resetter", 2, touched=("m:S",)),
        rec("t.py::unrelated", 3, touched=("m:T",)),
        rec("u.py::far_resetter", 4, touched=("m:S['x']",)),
    ]
    got = detector.cleaner_candidates(records, "t.py::polluter", "t.py::victim", ["m:S['x']"])
    assert got == ["t.py::resetter", "u.py::far_resetter"]


# ------------------------------------------------------------------------------ verdicts


def ev_with(runs: dict[tuple[str, ...], list[str]]) -> Evidence:
    ev = Evidence()
    for seq, outs in runs.items():
        for o in outs:
            ev.add(seq, o)
    return ev


@pytest.mark.parametrize(
    ("alone", "after", "verdict"),
    [
        ([], ["failed"], "untested"),
        (["passed"], [], "untested"),
        (["passed"], ["failed"], "pending"),
        (["passed", "passed"], ["failed", "failed"], "polluter"),
        (["failed", "failed"], ["passed", "passed"], "state-setter"),
        (["passed", "passed"], ["passed"], "none"),
        (["passed", "failed"], ["failed", "failed"], "flaky"),
        (["passed", "passed"], ["failed", "passed"], "flaky"),
        (["skipped", "passed"], ["passed", "passed"], "none"),
        (["passed", "passed"], ["error", "failed"], "polluter"),
    ],
)
def test_judge_pair(alone: list[str], after: list[str], verdict: str) -> None:
    ev = ev_with({("b",): alone, ("a", "b"): after})
    assert detector.judge_pair(ev, "a", "b") == verdict


def test_unknown_outcomes_are_not_evidence() -> None:
    ev = ev_with({("b",): ["passed", "missing", "crashed", "passed"]})
    assert ev.get(("b",)) == ["passed", "passed"]


def test_repeat_and_cleaner_plans_follow_the_first_results() -> None:
    records = [
        rec("t.py::v", 0, reads=("m:S",)),
        rec("t.py::p", 1, writes={"m:S": ""}),
        rec("t.py::c", 2, touched=("m:S",)),
        rec("t.py::q", 3, writes={"m:S": ""}),
    ]
    cands = detector.find_candidates(records)
    ev = ev_with({("t.py::v",): ["passed"], ("t.py::p", "t.py::v"): ["failed"],
                  ("t.py::q", "t.py::v"): ["passed"]})  # fmt: skip
    again = detector.repeat_plan(ev, cands)
    assert again == [("t.py::v",), ("t.py::p", "t.py::v")]
    cleaners = detector.cleaner_plan(ev, records, cands)
    assert ("t.py::p", "t.py::c", "t.py::v") in cleaners
    assert all(seq[0] == "t.py::p" for seq in cleaners)


def test_a_brittle_setter_is_judged_after_its_own_setter() -> None:
    reg, ena, end = "t.py::register", "t.py::enable", "t.py::enabled"
    cands = [
        Candidate(reg, ena, ("m:P['audit']",), ("",)),
        Candidate(reg, end, ("m:P['audit']",), ("",)),
        Candidate(ena, end, ("m:P['audit']['on']",), ("",)),
    ]
    # First round: enable fails alone and passes after register; enabled fails either way.
    ev = ev_with({(ena,): ["failed"], (reg, ena): ["passed"], (end,): ["failed"],
                  (reg, end): ["failed"], (ena, end): ["failed"]})  # fmt: skip
    assert detector.setter_chains(ev, cands) == {}
    assert detector.setter_chains(ev, cands, apparent=True) == {ena: (reg,)}
    # The repetition of register -> enable and, a round early, enable after register.
    plan = detector.repeat_plan(ev, cands)
    assert sorted(plan) == sorted([(ena,), (reg, ena), (reg, end), (reg, ena, end)])
    for seq, out in [((ena,), "failed"), ((reg, ena), "passed"), ((reg, end), "failed"),
                     ((reg, ena, end), "passed")]:  # fmt: skip
        ev.add(seq, out)
    assert detector.setter_chains(ev, cands) == {ena: (reg,)}
    assert detector.judge(ev, cands[2], {ena: (reg,)}) == ("pending", (reg,))
    assert detector.repeat_plan(ev, cands) == [(reg, ena, end)]
    ev.add((reg, ena, end), "passed")
    assert detector.repeat_plan(ev, cands) == []
    assert detector.setter_chains(ev, cands) == {ena: (reg,), end: (reg, ena)}
    graph = detector.build_graph(ev, [rec(t, i) for i, t in enumerate((reg, ena, end))], cands)
    assert {(d.source, d.target, d.kind) for d in graph.confirmed()} == {
        (reg, ena, "state-setter"),
        (ena, end, "state-setter"),
    }
    assert not graph.notes
    # A setter never runs after the test it is judged against.
    assert detector.context_of({ena: (end,)}, ena, end) == ()


def test_a_polluter_judged_after_its_setter_gets_its_cleaners_in_that_context() -> None:
    s, p, c, v = "t.py::s", "t.py::p", "t.py::c", "t.py::v"
    records = [rec(s, 0, writes={"m:A": ""}), rec(p, 1, outcome="failed", touched=("m:B",)),
               rec(c, 2, touched=("m:B",)), rec(v, 3, reads=("m:B",))]  # fmt: skip
    cands = [Candidate(s, p, ("m:A",), ("",)), Candidate(p, v, ("m:B",), ("",))]
    ev = ev_with({(p,): ["failed"] * 2, (s, p): ["passed"] * 2, (v,): ["passed"] * 2,
                  (p, v): ["passed"] * 2, (s, v): ["passed"] * 2,
                  (s, p, v): ["failed"] * 2})  # fmt: skip
    assert detector.judge(ev, cands[1], detector.setter_chains(ev, cands)) == ("polluter", (s,))
    assert detector.cleaner_plan(ev, records, cands) == [(s, p, c, v)]
    ev.add((s, p, c, v), "passed")
    ev.add((s, p, c, v), "passed")
    graph = detector.build_graph(ev, records, cands, [(s, p, c, v)])
    assert graph.cleaners == (Cleaners(p, v, (c,)),)


def test_pair_plan_respects_the_budget_and_shares_alone_runs() -> None:
    cands = [Candidate(f"a{i}", "b", ("m:S",), ("",)) for i in range(5)]
    seqs, left = detector.pair_plan(cands, {"b": 1.0}, budget=None)
    assert seqs.count(("b",)) == 1 and len(seqs) == 6 and not left
    seqs, left = detector.pair_plan(cands, {"b": 1.0, "a0": 1.0}, budget=3.1)
    assert seqs == [("b",), ("a0", "b")] and len(left) == 4


def test_followers_expand_a_site_that_mattered() -> None:
    records = [rec("t.py::v", 0, reads=("m:S",))] + [
        rec(f"t.py::w{i}", i + 1, writes={"m:S": ""}) for i in range(5)
    ]
    index = CandidateIndex(records)
    first = next(index.ordered())
    ev = ev_with({("t.py::v",): ["passed"], (first.source, "t.py::v"): ["failed"]})
    done = {(first.source, first.target)}
    more = detector.followers(ev, index, [first], done, limit=2)
    assert len(more) == 2 and all(c.target == "t.py::v" for c in more)
    assert first.source not in {c.source for c in more}


def test_build_graph_keeps_facts_and_open_candidates_and_notes_flaky_ones() -> None:
    records = [
        rec("t.py::victim", 0, reads=("m:S",)),
        rec("t.py::polluter", 1, writes={"m:S": "m.py:9"}),
        rec("t.py::brittle", 2, reads=("<env>:MODE",), outcome="failed"),
        rec("t.py::setter", 3, writes={"<env>:MODE": "t.py:20"}),
        rec("t.py::harmless", 4, writes={"m:S": ""}),
        rec("t.py::flaky", 5, reads=("<cwd>",)),
        rec("t.py::chdir", 6, writes={"<cwd>": ""}),
        rec("t.py::cleaner", 7, touched=("m:S",)),
        rec("t.py::untested", 8, reads=("m:T",)),
        rec("t.py::writer_t", 9, writes={"m:T": ""}),
    ]
    cands = detector.find_candidates(records)
    ev = ev_with(
        {
            ("t.py::victim",): ["passed", "passed"],
            ("t.py::polluter", "t.py::victim"): ["failed", "failed"],
            ("t.py::harmless", "t.py::victim"): ["passed"],
            ("t.py::brittle",): ["failed", "failed"],
            ("t.py::setter", "t.py::brittle"): ["passed", "passed"],
            ("t.py::flaky",): ["passed", "failed"],
            ("t.py::chdir", "t.py::flaky"): ["failed"],
            ("t.py::polluter", "t.py::cleaner", "t.py::victim"): ["passed", "passed"],
        }
    )
    graph = detector.build_graph(
        ev, records, cands, [("t.py::polluter", "t.py::cleaner", "t.py::victim")]
    )
    conf = {(d.source, d.target, d.kind) for d in graph.confirmed()}
    assert conf == {
        ("t.py::polluter", "t.py::victim", "polluter"),
        ("t.py::setter", "t.py::brittle", "state-setter"),
    }
    open_ = {(d.source, d.target) for d in graph.dependencies if not d.confirmed}
    assert ("t.py::writer_t", "t.py::untested") in open_
    assert ("t.py::harmless", "t.py::victim") not in open_  # refuted
    assert graph.cleaners == (Cleaners("t.py::polluter", "t.py::victim", ("t.py::cleaner",)),)
    assert any("non-deterministic" in n and "t.py::flaky" in n for n in graph.notes)
    dep = next(d for d in graph.confirmed() if d.kind == "polluter")
    assert dep.state == ("m:S",) and dep.written_at == ("m.py:9",)
    counts = detector.counts(ev, records, cands)
    assert counts["confirmed"] == 2 and counts["flaky"] == 1 and counts["refuted"] >= 1
    # The stored form survives a round trip.
    assert DependencyGraph.from_json(json.loads(json.dumps(graph.to_json()))) == graph


def test_record_json_round_trip() -> None:
    r = rec("t.py::a", 3, reads=("m:X",), writes={"m:Y": "m.py:1"}, touched=("m:Z",),
            scoped={"<env>:K": ""})  # fmt: skip
    assert Record.from_json(json.loads(json.dumps(r.to_json()))) == r


# -------------------------------------------------------------------------------- output


def sample_graph() -> DependencyGraph:
    return DependencyGraph(
        tests=("t.py::victim", "t.py::polluter", "t.py::cleaner", "t.py::brittle", "t.py::set"),
        dependencies=(
            Dependency(
                "polluter", "t.py::polluter", "t.py::victim", ("m:S['k']",), True, ("m.py:7",)
            ),
            Dependency("state-setter", "t.py::set", "t.py::brittle", ("<env>:MODE",), True, ("",)),
            Dependency("polluter", "t.py::cleaner", "t.py::victim", ("m:S",), False, ("",)),
        ),  # fmt: skip
        cleaners=(Cleaners("t.py::polluter", "t.py::victim", ("t.py::cleaner",)),),
        notes=("non-deterministic, dropped: t.py::x after t.py::y",),
    )


def test_table_names_roles_cleaners_and_state_with_its_line() -> None:
    text = _graphout.table(sample_graph())
    assert "t.py::victim (victim)" in text and "t.py::brittle (brittle)" in text
    assert "t.py::cleaner" in text
    assert "m:S['k'] (written at m.py:7)" in text
    assert "(candidate)" not in text  # unconfirmed ones only with include_candidates
    assert "(candidate)" in _graphout.table(sample_graph(), include_candidates=True)
    assert _graphout.table(DependencyGraph()) == ""


def test_json_output_marks_status() -> None:
    doc = _graphout.to_json(sample_graph(), {("t.py::cleaner", "t.py::victim"): "candidate"})
    assert doc["schema"] == "isolator.deps/1"
    statuses = {(d["source"], d["status"]) for d in doc["dependencies"]}
    assert ("t.py::polluter", "confirmed") in statuses
    assert ("t.py::cleaner", "candidate") in statuses


def test_dot_html_and_graph_files(tmp_path: Path) -> None:
    dot = _graphout.to_dot(sample_graph())
    assert '"t.py::polluter" -> "t.py::victim"' in dot and "dotted" in dot
    html = _graphout.to_html(sample_graph())
    assert "<svg" in html and "t.py::victim" in html
    # Self-contained: no external scripts, stylesheets or images.
    for marker in ("<script src", "<link ", "<img ", "@import"):
        assert marker not in html
    _graphout.write_graph(tmp_path / "g.dot", sample_graph())
    _graphout.write_graph(tmp_path / "g.html", sample_graph())
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    with pytest.raises(_graphout.OutputError, match="unknown format"):
        _graphout.write_graph(tmp_path / "g.png", sample_graph())


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_svg_through_graphviz(tmp_path: Path) -> None:
    _graphout.write_graph(tmp_path / "g.svg", sample_graph())
    assert "<svg" in (tmp_path / "g.svg").read_text()


def test_explain_text() -> None:
    g = sample_graph()
    text = _graphout.explain(g, "t.py::victim")
    assert "victim: it fails after t.py::polluter" in text
    assert "m:S['k'] (written at m.py:7)" in text and "t.py::cleaner" in text
    assert "candidate, not confirmed" in text
    assert "pollutes t.py::victim" in _graphout.explain(g, "t.py::polluter")
    assert "cleans up after t.py::polluter" in _graphout.explain(g, "t.py::cleaner")
    assert "brittle" in _graphout.explain(g, "t.py::brittle")
    assert "no known order dependency" in _graphout.explain(DependencyGraph(("a",)), "a")


# ------------------------------------------------------------------ the command (no pytest)


def test_explain_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    save_graph(tmp_path, sample_graph())
    sub = tmp_path / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)  # found in a parent directory
    assert _deps_cli.explain(["t.py::victim"]) == 0
    assert "t.py::polluter" in capsys.readouterr().out
    assert _deps_cli.explain(["victim"]) == 0  # a unique suffix is enough
    capsys.readouterr()
    assert _deps_cli.explain(["t.py::nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown test id 't.py::nope'" in err and len(err.strip().splitlines()) == 1


def test_explain_with_a_corrupt_or_missing_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _deps_cli.explain(["t.py::a"]) == 2
    assert "run `isolator deps` first" in capsys.readouterr().err
    store = tmp_path / ".isolator"
    store.mkdir()
    (store / "deps.json").write_text('{"schema": "isolator.deps/1", "tests": [', "utf-8")
    assert _deps_cli.explain(["t.py::a"]) == 2
    err = capsys.readouterr().err.strip()
    assert "deps.json" in err and "delete it" in err and len(err.splitlines()) == 1
    (store / "deps.json").write_text('{"schema": "other"}', "utf-8")
    assert _deps_cli.explain(["t.py::a"]) == 2
    assert "not a valid dependency graph" in capsys.readouterr().err


def test_deps_rejects_bad_options_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert _deps_cli.main(["--graph", "out.png", "tests"]) == 2
    assert "--graph out.png" in capsys.readouterr().err
    assert _deps_cli.main(["--jobs", "-1"]) == 2


def test_filter_pytest_args() -> None:
    kept, dropped = _deps_cli.filter_pytest_args(
        ["-x", "tests", "--maxfail=2", "--reset", "none", "-k", "a and b", "--lf",
         "--junitxml", "out.xml", "-p", "no:randomly", "-n", "2"]
    )  # fmt: skip
    assert kept == ["tests", "-k", "a and b", "-p", "no:randomly"]
    assert dropped == ["-x", "--maxfail=2", "--reset", "none", "--lf", "--junitxml", "out.xml",
                       "-n", "2"]  # fmt: skip


@pytest.mark.parametrize(
    ("seqs", "n_parts"),
    [
        ([("b",), ("a", "b"), ("b", "c"), ("c",), ("x", "c")], 1),
        ([("a", "b"), ("b", "c"), ("c",)], 1),
        ([("a", "x"), ("x",)], 2),
        # Repetitions stay ahead of the cleaner trial that follows them.
        ([("v",), ("v",), ("p", "v"), ("p", "c", "v")], 2),
        ([("b",), ("b",)], 2),
        ([], 0),
    ],
)
def test_plan_parts_never_start_a_sequence_with_the_test_that_just_ran(
    seqs: list[tuple[str, ...]], n_parts: int
) -> None:
    # A test handed to pytest as its own nextitem would be rerun without fixture setup
    # (parso 0.8.7's "non-deterministic" tests).
    parts = _deps_cli.plan_parts(seqs)
    assert sorted(s for part in parts for s in part) == sorted(seqs)
    for part in parts:
        assert part and all(x[-1] != y[0] for x, y in zip(part, part[1:]))
    assert len(parts) == n_parts
    flat = [s for part in parts for s in part]
    if ("p", "c", "v") in seqs:
        assert flat[-1] == ("p", "c", "v")


def _slow_writer_pairs(ev: Evidence) -> tuple[Any, Any]:
    """Candidates for t.py::v from three writers of its state, the middle one slow, and
    the cost of a sequence by the recorded durations."""
    records = [
        rec("t.py::v", 0, reads=("m:S",)),
        rec("t.py::fast1", 1, writes={"m:S": ""}),
        rec("t.py::slow", 2, writes={"m:S": ""}),
        rec("t.py::fast2", 3, writes={"m:S": ""}),
    ]
    durations = {r.nodeid: r.duration for r in records} | {"t.py::slow": 5.0}

    def cost(seq: tuple[str, ...]) -> float:
        return detector.estimate_cost(seq, durations)

    return _deps_cli._Pairs(CandidateIndex(records), ev), cost


def test_the_best_ranked_candidates_keep_their_rank_however_slow() -> None:
    # The _MIN_TRIED best-ranked candidates are tried whatever the budget: a slow one
    # among them gets a chunk of its own, in its turn.  Set aside instead, six's known
    # polluter (ranked first: its first import of html.parser makes it slow) waited behind
    # a hundred cheaper candidates and was missed on a fast run.
    pairs, cost = _slow_writer_pairs(Evidence({"t.py::v": "passed"}))
    assert pairs.take(0.015, cost) == [("t.py::fast1", "t.py::v")]
    assert pairs.take(0.015, cost) == [("t.py::slow", "t.py::v")]
    assert pairs.take(0.015, cost) == [("t.py::fast2", "t.py::v")]
    assert not pairs.costly


def test_pairs_set_slow_candidates_aside_and_let_the_recording_stand_in_for_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_deps_cli, "_MIN_TRIED", 0)  # (past the best-ranked: see below)
    ev = Evidence({"t.py::v": "passed"})
    pairs, cost = _slow_writer_pairs(ev)

    # [A, V] only: V's recorded outcome stands in for its first run alone.  The slow
    # writer waits until the cheaper candidates are out.
    assert pairs.take(0.015, cost) == [("t.py::fast1", "t.py::v")]
    assert pairs.costly and not pairs.exhausted
    assert pairs.take(0.015, cost) == [("t.py::fast2", "t.py::v")]
    assert pairs.take(0.015, cost) == [("t.py::slow", "t.py::v")]
    assert pairs.take(0.015, cost) == [] and pairs.exhausted
    # One run after a writer that agrees with the recording refutes; a difference needs
    # two real runs alone before it counts.
    ev.add(("t.py::fast1", "t.py::v"), "passed")
    ev.add(("t.py::slow", "t.py::v"), "failed")
    assert detector.judge_pair(ev, "t.py::fast1", "t.py::v") == "none"
    assert detector.judge_pair(ev, "t.py::slow", "t.py::v") == "pending"
    cands = pairs.tried
    assert detector.repeat_plan(ev, cands) == [
        ("t.py::v",),
        ("t.py::v",),
        ("t.py::slow", "t.py::v"),
    ]


def test_index_finds_the_same_pairs_as_the_overlap_rule_on_every_read_site() -> None:
    # The index only compares a written site with read sites that are its prefixes or
    # extensions; any other overlap rule is asked about every read site of the root.
    records = [
        rec("t.py::a", 0, reads=("m:X", "<env>", "<file>:/d", "m:Y['k'].z", "<sys.modules>")),
        rec("t.py::b", 1, writes={"m:X['k']": "", "<env>:HOME": "", "<file>:/d/x": ""}),
        rec("t.py::c", 2, reads=("m:X['k'].a", "m:X1", "<env>:HOME", "<file>:/dx"),
            writes={"m:Y": "", "<sys.modules>:p.q": "", "m:X['j']": ""}),
        rec("t.py::d", 3, reads=("m:Y['k']", "<sys.modules>:p", "m:X['j']['q']"),
            writes={"m:X": "", "<file>:/d": ""}, touched=("m:Z['a']['b']",),
            outcome="failed"),
        rec("t.py::e", 4, reads=("m:Z", "m:Z['a']"), writes={"m:Z['a']['c']": ""}),
    ]  # fmt: skip

    def general(a: str, b: str) -> bool:
        return detector.sites_overlap(a, b)

    fast, slow = CandidateIndex(records), CandidateIndex(records, general)
    assert dict(fast.by_target) == dict(slow.by_target) and fast.precise == slow.precise
    assert [dataclasses.astuple(c) for c in fast.ordered()] == [
        dataclasses.astuple(c) for c in slow.ordered()
    ]
    assert pairs(list(fast.ordered())) >= {
        ("t.py::b", "t.py::a"), ("t.py::b", "t.py::c"), ("t.py::d", "t.py::a"),
        ("t.py::c", "t.py::d"), ("t.py::d", "t.py::c"), ("t.py::c", "t.py::a"),
    }  # fmt: skip


def test_follow_ups_come_once_and_leave_out_what_is_running() -> None:
    records = [
        rec("t.py::v", 0, reads=("m:S",)),
        rec("t.py::p", 1, writes={"m:S": ""}),
        rec("t.py::q", 2, writes={"m:S": ""}),
        rec("t.py::c", 3, touched=("m:S",)),
        rec("t.py::w", 4, reads=("m:T",)),
        rec("t.py::r", 5, writes={"m:T": ""}),
        # (As many writers as S: a site with fewer would come first.)
        rec("t.py::s", 6, writes={"m:T": ""}),
    ]
    index = CandidateIndex(records)
    ev = Evidence({r.nodeid: r.outcome for r in records})
    given = _deps_cli._Pairs(index, ev)
    follow = _deps_cli._FollowUps(ev, index, records, given, max_cleaners=30)
    assert given.take(2, len) == [("t.py::p", "t.py::v")]
    assert follow.followers() == [] and follow.seqs(Counter()) == []  # no result yet
    ev.add(("t.py::p", "t.py::v"), "failed")
    # The apparent edge brings the other writer of its state (otherwise handed out
    # after the nearest writers of every other site) to the front, once.
    assert pairs(follow.followers()) == {("t.py::q", "t.py::v")}
    assert follow.followers() == []
    repeats = [("t.py::v",), ("t.py::v",), ("t.py::p", "t.py::v")]
    assert follow.seqs(Counter(), cleaners=False) == repeats
    trials = [("t.py::p", "t.py::q", "t.py::v"), ("t.py::p", "t.py::c", "t.py::v")]
    assert follow.seqs(Counter(), cleaners=True) == [*repeats, *trials]
    # What is already handed out is not asked for again.
    running = Counter([("t.py::v",), trials[1]])
    assert follow.seqs(running) == [("t.py::v",), ("t.py::p", "t.py::v"), trials[0]]
    assert follow.cleaner_seqs == trials
