"""The data that flows between isolator's stages.

Every stage passes plain frozen dataclasses; side effects live in the recorder, the
resetter and the plugin.  A *state site* is a string ``module:qualname[.attr|[key]]``,
for example ``shop.config:SETTINGS['currency']`` or ``<env>:SHOP_MODE``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

StateSite = str
NodeId = str

DEPS_SCHEMA: Final = "isolator.deps/1"

DependencyKind = Literal["polluter", "state-setter"]


@dataclass(frozen=True)
class AccessLog:
    """What one test read and what net change it left behind.

    ``writes`` maps a site to the ``file:line`` that wrote it when known (else "").
    """

    nodeid: NodeId
    reads: frozenset[StateSite] = frozenset()
    writes: dict[StateSite, str] = field(default_factory=dict)
    outcome: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "reads": sorted(self.reads),
            "writes": dict(sorted(self.writes.items())),
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AccessLog:
        return cls(
            nodeid=str(data["nodeid"]),
            reads=frozenset(str(s) for s in data.get("reads", ())),
            writes={str(k): str(v) for k, v in dict(data.get("writes", {})).items()},
            outcome=str(data.get("outcome", "")),
        )


@dataclass(frozen=True)
class ResetPlan:
    """What the resetter restored after one test, and what it could not."""

    nodeid: NodeId
    reset: tuple[StateSite, ...] = ()
    unrestorable: tuple[tuple[StateSite, str], ...] = ()  # (site, reason)


@dataclass(frozen=True)
class Dependency:
    """One order dependency: ``source`` must (state-setter) or must not (polluter)
    run before ``target`` in the same process."""

    kind: DependencyKind
    source: NodeId
    target: NodeId
    state: tuple[StateSite, ...] = ()
    confirmed: bool = False
    written_at: tuple[str, ...] = ()  # file:line of the writes, aligned with ``state``

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "target": self.target,
            "state": list(self.state),
            "confirmed": self.confirmed,
            "written_at": list(self.written_at),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Dependency:
        kind = data["kind"]
        if kind not in ("polluter", "state-setter"):
            raise ValueError(f"unknown dependency kind {kind!r}")
        return cls(
            kind=kind,
            source=str(data["source"]),
            target=str(data["target"]),
            state=tuple(str(s) for s in data.get("state", ())),
            confirmed=bool(data.get("confirmed", False)),
            written_at=tuple(str(s) for s in data.get("written_at", ())),
        )


@dataclass(frozen=True)
class Cleaners:
    polluter: NodeId
    victim: NodeId
    cleaners: tuple[NodeId, ...]

    def to_json(self) -> dict[str, Any]:
        return {"polluter": self.polluter, "victim": self.victim, "cleaners": list(self.cleaners)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cleaners:
        return cls(
            polluter=str(data["polluter"]),
            victim=str(data["victim"]),
            cleaners=tuple(str(c) for c in data.get("cleaners", ())),
        )


@dataclass(frozen=True)
class DependencyGraph:
    """The detector's result, as stored in ``.isolator/deps.json``.

    Shape of the JSON form::

        {"schema": "isolator.deps/1", "tests": [nodeid...],
         "dependencies": [{"kind", "source", "target", "state", "confirmed"}...],
         "cleaners": [{"polluter", "victim", "cleaners": [...]}...]}
    """

    tests: tuple[NodeId, ...] = ()
    dependencies: tuple[Dependency, ...] = ()
    cleaners: tuple[Cleaners, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. candidates dropped as flaky

    def confirmed(self) -> tuple[Dependency, ...]:
        return tuple(d for d in self.dependencies if d.confirmed)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": DEPS_SCHEMA,
            "tests": list(self.tests),
            "dependencies": [d.to_json() for d in self.dependencies],
            "cleaners": [c.to_json() for c in self.cleaners],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Any) -> DependencyGraph:
        if not isinstance(data, dict) or data.get("schema") != DEPS_SCHEMA:
            raise ValueError(f"not an {DEPS_SCHEMA} document")
        return cls(
            tests=tuple(str(t) for t in data.get("tests", ())),
            dependencies=tuple(Dependency.from_json(d) for d in data.get("dependencies", ())),
            cleaners=tuple(Cleaners.from_json(c) for c in data.get("cleaners", ())),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )
