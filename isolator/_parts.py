"""The files a supervised pytest process leaves for its supervisor: how far it got, whether
it asked for a new process, and its JUnit XML (moved into place, rebuilt after a crash,
merged across processes).  Imported by the supervisor once the test process is running:
nothing here is needed before it starts."""

from __future__ import annotations

import json
import os
import shutil
import struct
import xml.etree.ElementTree as ET
from typing import Any

from isolator._store import StoreError, read_json
from isolator._supervise import COUNTS_FILE, RESTART_FILE


def progress(sup: str) -> tuple[list[str], int | None, bool]:
    """The collection, the index of the last test started (None: none), and whether that
    test was over (the process died between two tests)."""
    try:
        collected = [str(x) for x in read_json(os.path.join(sup, "collected.json"))]
    except StoreError:
        return [], None, False
    # As the plugin's _Progress stores it: 8 bytes, little-endian, -1 before the first
    # test, -2 - i once test i is over.
    try:
        with open(os.path.join(sup, "progress"), "rb") as f:
            raw = f.read(8)
    except OSError:
        return collected, None, False
    if len(raw) != 8:
        return collected, None, False
    (i,) = struct.unpack("<q", raw)
    over = i <= -2
    if over:
        i = -2 - i
    return collected, (i if 0 <= i < len(collected) else None), over


def failed_so_far(sup: str) -> int:
    """The run's failed reports up to the child's end (see plugin._Progress), 0 if unknown."""
    try:
        with open(os.path.join(sup, "progress"), "rb") as f:
            raw = f.read(16)
    except OSError:
        return 0
    return struct.unpack("<q", raw[8:16])[0] if len(raw) == 16 else 0


def maxfail(sup: str) -> int:
    """The child's --maxfail (-x is 1; 0: none), as it wrote it before its first test."""
    try:
        data = read_json(os.path.join(sup, "part.json"))
    except StoreError:
        return 0
    n = data.get("maxfail") if isinstance(data, dict) else None
    return n if isinstance(n, int) and n > 0 else 0


def junit_target(sup: str) -> str | None:
    """The JUnit XML path the child found in its configuration (ini ``addopts``,
    ``PYTEST_ADDOPTS``) and wrote to a part file instead (see plugin.pytest_configure)."""
    try:
        target = read_json(os.path.join(sup, "junit_target.json"))
    except StoreError:
        return None
    return target if isinstance(target, str) and target else None


def restart_request(sup: str) -> int | None:
    """The index of the first test left for a new process, if the child asked for one."""
    try:
        data = read_json(os.path.join(sup, RESTART_FILE))
    except StoreError:
        return None
    nxt = data.get("next") if isinstance(data, dict) else None
    return nxt if isinstance(nxt, int) and nxt > 0 else None


def read_failed(sup: str) -> bool:
    try:
        data = read_json(os.path.join(sup, RESTART_FILE))
    except StoreError:
        return True
    return not isinstance(data, dict) or data.get("failed") != 0


def _junit_names(nodeid: str) -> tuple[str, str]:
    """(classname, name) of a test as pytest's junitxml writes them: the file as a dotted
    path, then each class, in ``classname``; the function (with its parameters) in
    ``name``."""
    path, bracket, params = nodeid.partition("[")
    parts = path.split("::")
    parts[0] = parts[0].replace("/", ".").removesuffix(".py")
    parts[-1] += bracket + params
    return ".".join(parts[:-1]), parts[-1]


def junit_from_results(results: str, target: str) -> None:
    cases: dict[str, Any] = {}
    try:
        with open(results, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return
    suite = ET.Element("testsuite", name="pytest")
    for row in rows:
        nodeid = row["nodeid"]
        case = cases.get(nodeid)
        if case is None:
            classname, name = _junit_names(nodeid)
            case = cases[nodeid] = ET.SubElement(
                suite,
                "testcase",
                classname=classname,
                name=name,
                time=f"{row.get('duration', 0):.3f}",
            )
        if row["outcome"] == "failed":
            tag = "failure" if row["when"] == "call" else "error"
            ET.SubElement(case, tag, message=f"{row['when']} failed").text = row.get("message", "")
        elif row["outcome"] == "skipped":
            ET.SubElement(case, "skipped", message="skipped")
    ET.ElementTree(suite).write(target, encoding="utf-8", xml_declaration=True)


def move_junit(part: str, target: str) -> None:
    if not os.path.exists(part):
        return  # pytest wrote no report (usage error, interrupted before the end)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    try:
        os.replace(part, target)
    except OSError:
        shutil.move(part, target)  # another file system


def merge_junit(parts: list[str], target: str, crashed: list[tuple[str, str]]) -> None:
    suites: list[Any] = []
    for p in parts:
        try:
            root = ET.parse(p).getroot()
        except (OSError, ET.ParseError):
            continue
        suites += [root] if root.tag == "testsuite" else list(root)
    if not suites:
        return
    merged = suites[0]
    # Each part collects the whole suite: what collection reported (a module skipped at
    # import: an entry with an empty classname, named by the module) is in every part,
    # and is kept once.
    collected = {c.get("name") for c in merged.findall("testcase") if not c.get("classname")}
    for s in suites[1:]:
        for case in s.findall("testcase"):
            if not case.get("classname"):
                if case.get("name") in collected:
                    continue
                collected.add(case.get("name"))
            merged.append(case)
    for nodeid, how in crashed:
        classname, name = _junit_names(nodeid)
        # The reports it streamed before the crash made its entry already: one per test.
        found = [
            c for c in merged.findall("testcase")
            if c.get("classname") == classname and c.get("name") == name
        ]  # fmt: skip
        if found:
            case = found[-1]
            for old in case.findall("skipped"):
                case.remove(old)
        else:
            case = ET.SubElement(merged, "testcase", classname=classname, name=name, time="0")
        ET.SubElement(
            case, "failure", message=f"crashed the test process ({how})"
        ).text = f"isolator: {nodeid} crashed the test process ({how})"
    cases = merged.findall("testcase")
    merged.set("tests", str(len(cases)))
    total = 0.0
    for suite in suites:
        try:
            total += float(suite.get("time", "0"))
        except ValueError:
            pass
    merged.set("time", f"{total:.3f}")  # every part's, not the first one's
    for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        merged.set(attr, str(sum(1 for c in cases if c.find(kind) is not None)))
    root = ET.Element("testsuites")
    root.append(merged)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    tmp = target + ".tmp"
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, target)


# Categories in the order of pytest's last line; others follow in theirs.
_ORDER = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "warnings", "error")
_PLURAL = {"warnings": ("warning", "warnings"), "error": ("error", "errors")}


def whole_run_line(sups: list[str], seconds: float) -> str | None:
    """pytest's last line for a run made of several processes, each of which printed its
    own: their counts added up.  None when a part left no counts (it crashed)."""
    total: dict[str, int] = {}
    for sup in sups:
        try:
            counts = read_json(os.path.join(sup, COUNTS_FILE))
        except StoreError:
            return None
        if not isinstance(counts, dict):
            return None
        for k, n in counts.items():
            if isinstance(k, str) and isinstance(n, int):
                total[k] = total.get(k, 0) + n
    keys = [k for k in _ORDER if total.get(k)] + sorted(k for k in total if k not in _ORDER)
    words = []
    for k in keys:
        one, many = _PLURAL.get(k, (k, k))
        words.append(f"{total[k]} {one if total[k] == 1 else many}")
    done = ", ".join(words) or "no tests ran"
    return f"isolator: the whole run, in {len(sups)} processes: {done} in {seconds:.2f}s"
