"""Output of ``isolator deps`` and ``isolator explain``: table, JSON, DOT, SVG and HTML.

Everything here is a pure function of a :class:`~isolator._types.DependencyGraph` (plus the
detector's extra facts for JSON), except :func:`write_graph`, which writes a file and may
run Graphviz's ``dot``.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from tabulate import tabulate  # type: ignore[import-untyped,unused-ignore]

from isolator._types import Dependency, DependencyGraph, NodeId

GRAPH_SUFFIXES: Final = (".dot", ".gv", ".svg", ".html", ".htm")
_ROLE: Final = {"polluter": "victim", "state-setter": "brittle"}


class OutputError(Exception):
    """Output cannot be written; the message is one line."""


def _state_line(site: str, where: str) -> str:
    return f"{site} (written at {where})" if where else site


def _cleaners_of(graph: DependencyGraph) -> dict[tuple[NodeId, NodeId], tuple[NodeId, ...]]:
    return {(c.polluter, c.victim): c.cleaners for c in graph.cleaners}


def table(graph: DependencyGraph, include_candidates: bool = False) -> str:
    """One row per victim or brittle test: its polluters or state-setters, the cleaners
    between them, and the shared state with the line that wrote it."""
    deps = [d for d in graph.dependencies if d.confirmed or include_candidates]
    if not deps:
        return ""
    cleaners = _cleaners_of(graph)
    rows: dict[tuple[NodeId, str], list[Dependency]] = defaultdict(list)
    for d in deps:
        rows[(d.target, d.kind)].append(d)
    body = []
    for (target, kind), group in rows.items():
        sources: list[str] = []
        found_cleaners: list[str] = []
        state: list[str] = []
        for d in group:
            mark = "" if d.confirmed else " (candidate)"
            sources.append(d.source + mark)
            for c in cleaners.get((d.source, d.target), ()):
                if c not in found_cleaners:
                    found_cleaners.append(c)
            where = list(d.written_at) + [""] * (len(d.state) - len(d.written_at))
            for site, loc in zip(d.state, where, strict=True):
                line = _state_line(site, loc)
                if line not in state:
                    state.append(line)
        body.append(
            [
                f"{target} ({_ROLE[kind]})",
                "\n".join(sources),
                "\n".join(found_cleaners) or "-",
                "\n".join(state) or "?",
            ]
        )
    headers = ["victim or brittle", "polluters or state-setters", "cleaners", "shared state"]
    text: str = tabulate(body, headers=headers, tablefmt="simple_grid")
    return text


def summary(graph: DependencyGraph, stats: Mapping[str, Any]) -> str:
    """One line: what was found and what it cost."""
    conf = graph.confirmed()
    polluters = sum(1 for d in conf if d.kind == "polluter")
    setters = len(conf) - polluters
    n_clean = sum(len(c.cleaners) for c in graph.cleaners)
    open_ = len(graph.dependencies) - len(conf)
    parts = [
        f"{len(graph.tests)} tests",
        f"{stats.get('candidates', 0)} candidate pairs",
        f"{polluters} polluter and {setters} state-setter dependencies confirmed",
        f"{n_clean} cleaners",
    ]
    if stats.get("refuted"):
        parts.append(f"{stats['refuted']} refuted")
    if stats.get("flaky"):
        parts.append(f"{stats['flaky']} non-deterministic (dropped)")
    if open_:
        parts.append(f"{open_} not confirmed")
    return "isolator deps: " + ", ".join(parts)


def to_json(
    graph: DependencyGraph,
    statuses: Mapping[tuple[NodeId, NodeId], str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``isolator.deps/1`` document, each dependency with its ``status``."""
    doc = graph.to_json()
    for d in doc["dependencies"]:
        key = (d["source"], d["target"])
        d["status"] = (statuses or {}).get(key, "confirmed" if d["confirmed"] else "candidate")
    if extra:
        for k, v in extra.items():
            doc.setdefault(k, v)
    return doc


# ------------------------------------------------------------------------------- graphs


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _q(s: str) -> str:
    return '"' + _esc(s) + '"'


def _q_lines(lines: list[str]) -> str:
    return '"' + "\\n".join(_esc(x) for x in lines) + '"'


def to_dot(graph: DependencyGraph, include_candidates: bool = True) -> str:
    """Graphviz source: polluter edges red, state-setter edges green, candidates dashed
    grey, cleaners as dotted blue edges into the victim they protect."""
    deps = [d for d in graph.dependencies if d.confirmed or include_candidates]
    nodes: list[str] = []

    def node(n: str) -> None:
        if n not in nodes:
            nodes.append(n)

    lines = [
        "digraph isolator_deps {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fillcolor="#f6f6f6", fontname="Helvetica",'
        " fontsize=10];",
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    edges = []
    for d in deps:
        node(d.source)
        node(d.target)
        label = _q_lines(list(d.state[:3]) + (["…"] if len(d.state) > 3 else []))
        if not d.confirmed:
            style = 'color="#999999", style=dashed, fontcolor="#777777"'
        elif d.kind == "polluter":
            style = 'color="#c0392b", penwidth=1.6'
        else:
            style = 'color="#27ae60", penwidth=1.6'
        edges.append(f"  {_q(d.source)} -> {_q(d.target)} [label={label}, {style}];")
    for c in graph.cleaners:
        for cleaner in c.cleaners:
            node(cleaner)
            edges.append(
                f'  {_q(cleaner)} -> {_q(c.victim)} [style=dotted, color="#2e6fb7", '
                f'label={_q("cleans after " + _short(c.polluter))}, fontcolor="#2e6fb7"];'
            )
    roles = _roles(graph)
    for n in nodes:
        color = {"victim": "#fde2e0", "brittle": "#e1f5e6"}.get(roles.get(n, ""), "#f6f6f6")
        lines.append(f"  {_q(n)} [label={_q(_short(n))}, tooltip={_q(n)}, fillcolor={_q(color)}];")
    lines += edges
    lines.append("}")
    return "\n".join(lines) + "\n"


def _short(nodeid: str) -> str:
    path, sep, rest = nodeid.partition("::")
    return f"{os.path.basename(path)}::{rest}" if sep else nodeid


def _roles(graph: DependencyGraph) -> dict[str, str]:
    out = {}
    for d in graph.confirmed():
        out[d.target] = _ROLE[d.kind]
    return out


def dot_available() -> bool:
    return shutil.which("dot") is not None


def render_svg(dot_source: str) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise OutputError(
            "Graphviz `dot` is not installed; write --graph FILE.dot or FILE.html instead"
        )
    try:
        proc = subprocess.run(
            [exe, "-Tsvg"], input=dot_source, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OutputError(f"Graphviz `dot` failed: {exc}") from None
    if proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["no message"])[0]
        raise OutputError(f"Graphviz `dot` failed: {msg}")
    return proc.stdout


def to_html(graph: DependencyGraph, title: str = "isolator deps") -> str:
    """A self-contained page: the graph as inline SVG (Graphviz when present, else a
    simple two-column drawing) and the dependency table.  No external assets."""
    if graph.dependencies and dot_available():
        try:
            svg = render_svg(to_dot(graph))
            svg = svg[svg.find("<svg") :] if "<svg" in svg else svg
        except OutputError:
            svg = _simple_svg(graph)
    else:
        svg = _simple_svg(graph)
    cleaners = _cleaners_of(graph)
    rows = []
    for d in graph.dependencies:
        state = "<br>".join(
            html.escape(_state_line(s, w))
            for s, w in zip(d.state, list(d.written_at) + [""] * len(d.state), strict=False)
        )
        cl = "<br>".join(html.escape(c) for c in cleaners.get((d.source, d.target), ()))
        status = "confirmed" if d.confirmed else "candidate"
        rows.append(
            f'<tr class="{status} {d.kind}"><td>{html.escape(d.target)}</td>'
            f"<td>{_ROLE[d.kind]}</td><td>{html.escape(d.source)}</td><td>{cl or '-'}</td>"
            f"<td>{state}</td><td>{status}</td></tr>"
        )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in graph.notes)
    return _PAGE.format(
        title=html.escape(title),
        n_tests=len(graph.tests),
        n_conf=len(graph.confirmed()),
        n_cand=len(graph.dependencies) - len(graph.confirmed()),
        svg=svg,
        rows="\n".join(rows) or '<tr><td colspan="6">no dependencies</td></tr>',
        notes=f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "",
    )


_PAGE: Final = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }}
th {{ background: #eee; }}
tr.candidate {{ color: #888; }}
tr.polluter td:nth-child(2) {{ color: #c0392b; }}
tr.state-setter td:nth-child(2) {{ color: #27ae60; }}
.graph {{ overflow: auto; border: 1px solid #ddd; margin: 1em 0; padding: 0.5em; }}
label {{ font-size: 13px; }}
</style></head><body>
<h1>{title}</h1>
<p>{n_tests} tests, {n_conf} confirmed dependencies, {n_cand} unconfirmed candidates.
Red: polluter &rarr; victim; green: state-setter &rarr; brittle; dotted blue: cleaner;
dashed grey: candidate not confirmed.</p>
<div class="graph">{svg}</div>
<label><input type="checkbox" id="onlyconf"> confirmed only</label>
<table id="deps"><thead><tr><th>victim or brittle</th><th>role</th>
<th>polluter or state-setter</th><th>cleaners</th><th>shared state</th><th>status</th></tr></thead>
<tbody>
{rows}
</tbody></table>
{notes}
<script>
document.getElementById("onlyconf").addEventListener("change", function (e) {{
  document.querySelectorAll("#deps tr.candidate").forEach(function (tr) {{
    tr.style.display = e.target.checked ? "none" : "";
  }});
}});
</script>
</body></html>
"""


def _simple_svg(graph: DependencyGraph) -> str:
    """Sources on the left, targets on the right, one line per dependency."""
    deps = list(graph.dependencies)
    left: list[str] = []
    right: list[str] = []
    for d in deps:
        if d.source not in left:
            left.append(d.source)
        if d.target not in right:
            right.append(d.target)
    for c in graph.cleaners:
        for cl in c.cleaners:
            if cl not in left:
                left.append(cl)
    rows = max(len(left), len(right), 1)
    h = 30 + rows * 28
    w = 1000
    ly = {n: 30 + i * 28 for i, n in enumerate(left)}
    ry = {n: 30 + i * 28 for i, n in enumerate(right)}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'font-family="Helvetica" font-size="11">'
    ]
    for d in deps:
        color = "#999" if not d.confirmed else ("#c0392b" if d.kind == "polluter" else "#27ae60")
        dash = ' stroke-dasharray="4 3"' if not d.confirmed else ""
        parts.append(
            f'<line x1="330" y1="{ly[d.source]}" x2="670" y2="{ry[d.target]}" '
            f'stroke="{color}" stroke-width="1.5"{dash}><title>'
            f"{html.escape(', '.join(d.state))}</title></line>"
        )
    for c in graph.cleaners:
        for cl in c.cleaners:
            parts.append(
                f'<line x1="330" y1="{ly[cl]}" x2="670" y2="{ry.get(c.victim, 30)}" '
                f'stroke="#2e6fb7" stroke-dasharray="1 3" stroke-width="1.5"/>'
            )
    for n, y in ly.items():
        parts.append(
            f'<text x="325" y="{y + 4}" text-anchor="end"><title>{html.escape(n)}</title>'
            f"{html.escape(_short(n))}</text>"
        )
    for n, y in ry.items():
        parts.append(
            f'<text x="675" y="{y + 4}"><title>{html.escape(n)}</title>'
            f"{html.escape(_short(n))}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def write_graph(path: str | os.PathLike[str], graph: DependencyGraph) -> None:
    """Write ``.dot``/``.gv``, ``.svg`` (Graphviz) or a self-contained ``.html`` by suffix."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in GRAPH_SUFFIXES:
        raise OutputError(
            f"--graph {p}: unknown format {suffix or '(no suffix)'}; use .dot, .svg or .html"
        )
    if suffix in (".dot", ".gv"):
        text = to_dot(graph)
    elif suffix == ".svg":
        text = render_svg(to_dot(graph))
    else:
        text = to_html(graph)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {p}: {exc.strerror or exc}") from None


# ------------------------------------------------------------------------------ explain


def explain(graph: DependencyGraph, nodeid: NodeId) -> str:
    """Why ``nodeid`` depends on other tests (and which tests depend on it)."""
    cleaners = _cleaners_of(graph)
    lines: list[str] = []
    into = [d for d in graph.dependencies if d.target == nodeid]
    out_of = [d for d in graph.dependencies if d.source == nodeid]
    cleans = [c for c in graph.cleaners if nodeid in c.cleaners]
    for d in sorted(into, key=lambda d: (not d.confirmed, d.kind, d.source)):
        status = "" if d.confirmed else " [candidate, not confirmed]"
        if d.kind == "polluter":
            lines.append(f"{nodeid} is a victim: it fails after {d.source}{status}")
        else:
            lines.append(f"{nodeid} is brittle: it fails alone and passes after {d.source}{status}")
        lines += _state_lines(d)
        cl = cleaners.get((d.source, d.target))
        if cl:
            lines.append("    cleaners (run between them, the victim passes again):")
            lines += [f"      {c}" for c in cl]
        elif d.kind == "polluter" and d.confirmed:
            lines.append("    no test cleans this state")
    for d in sorted(out_of, key=lambda d: (not d.confirmed, d.kind, d.target)):
        status = "" if d.confirmed else " [candidate, not confirmed]"
        verb = "pollutes" if d.kind == "polluter" else "sets up state for"
        lines.append(f"{nodeid} {verb} {d.target}{status}")
        lines += _state_lines(d)
    for c in cleans:
        lines.append(f"{nodeid} cleans up after {c.polluter} for {c.victim}")
    if not lines:
        lines.append(f"{nodeid} has no known order dependency")
    for n in graph.notes:
        if nodeid in n:
            lines.append(f"note: {n}")
    return "\n".join(lines)


def _state_lines(d: Dependency) -> Iterable[str]:
    where = list(d.written_at) + [""] * len(d.state)
    for site, loc in zip(d.state, where, strict=False):
        yield "    through " + _state_line(site, loc)
