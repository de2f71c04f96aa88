"""Data produced by the static pass: state declarations and per-code access sets."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

# Defined on its own, where the resetter finds it without the static pass.
from isolator._sites import sites_overlap as sites_overlap
from isolator._types import StateSite

#: Kinds of ``StateDecl``, in the vocabulary of DESIGN.md.
DECL_KINDS: Final = (
    "global",
    "rebound-global",
    "class-attr",
    "mutable-default",
    "cache",
    "closure",
    "singleton",
)


_SEP: Final = re.compile(r"[.\[]")


def split_site_path(path: str) -> tuple[str, str]:
    """Split ``NAME.rest`` or ``NAME[k]rest`` (a site after its ``module:``) into the
    first component and the rest."""
    m = _SEP.search(path)
    if m is None:
        return path, ""
    i = m.start()
    return path[:i], path[i:]


class FrozenMap(Mapping[StateSite, int]):
    """A read-only, hashable ``site -> line`` mapping (``CodeAccess.writes``)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[StateSite, int] | None = None) -> None:
        self._data: dict[StateSite, int] = dict(data) if data else {}

    def __getitem__(self, key: StateSite) -> int:
        return self._data[key]

    def __iter__(self) -> Iterator[StateSite]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))


_EMPTY_WRITES: Final = FrozenMap()
_EMPTY_READS: Final[frozenset[StateSite]] = frozenset()


@dataclass(frozen=True)
class StateDecl:
    """One place of module-level mutable state found in the source.

    ``kind`` is one of ``DECL_KINDS``; a site may appear with two kinds (a mutable dict
    that a function also rebinds through ``global`` is ``global`` and ``rebound-global``).
    """

    site: StateSite
    kind: str
    lineno: int


@dataclass(frozen=True)
class CodeAccess:
    """The state sites one code object (function, method, lambda, class or module body,
    generator expression) reads and writes.

    ``qualname`` and ``firstlineno`` equal the ``co_qualname`` and ``co_firstlineno`` of the
    code object the running Python compiles for it; ``writes`` maps each site to the first
    line that writes it; ``clears`` holds the written sites this code only empties
    (``.clear()``: an invalidation, which a cache's own code may do, not a setter).
    """

    qualname: str
    firstlineno: int
    reads: frozenset[StateSite] = frozenset()
    writes: Mapping[StateSite, int] = field(default=_EMPTY_WRITES)
    clears: frozenset[StateSite] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.writes, FrozenMap):
            object.__setattr__(self, "writes", FrozenMap(self.writes))

    def to_json(self) -> list[Any]:
        """``[qualname, firstlineno, reads?, writes?, clears?]``: empty trailing sets are
        left out."""
        out: list[Any] = [self.qualname, self.firstlineno]
        if self.reads or self.writes:
            out.append(sorted(self.reads))
        if self.writes:
            out.append(dict(self.writes))
        if self.clears:
            out.append(sorted(self.clears))
        return out

    @classmethod
    def from_json(cls, data: list[Any]) -> CodeAccess:
        n = len(data)
        if n < 2 or n > 5:
            raise ValueError(f"bad code entry {data!r}")
        reads = frozenset(str(s) for s in data[2]) if n > 2 and data[2] else _EMPTY_READS
        if n > 3 and data[3]:
            writes = FrozenMap({str(k): int(v) for k, v in data[3].items()})
        else:
            writes = _EMPTY_WRITES
        clears = frozenset(str(s) for s in data[4]) if n > 4 and data[4] else _EMPTY_READS
        # Skips the dataclass __init__ (a frozen one pays for object.__setattr__ per field):
        # warm cache loads build thousands of these.
        obj = object.__new__(cls)
        obj.__dict__.update(
            qualname=str(data[0]),
            firstlineno=int(data[1]),
            reads=reads,
            writes=writes,
            clears=clears,
        )
        return obj


@dataclass(frozen=True)
class ModuleState:
    """What the static pass found in one module.

    ``decls`` lists its state; ``code`` the accesses of each code object, in source order.
    ``error`` is a one-line message when the source could not be read or parsed (then
    ``decls`` and ``code`` are empty).  ``exports`` maps names bound by ``from X import Y``
    at module level to ``X:Y`` (re-exports), ``classes`` lists the dotted paths of classes
    that live as long as the module, and ``rebinds`` holds the written sites whose write
    rebinds a name (``global X; X = ...``, ``mod.X = ...``) rather than mutating an object.
    """

    modname: str
    filename: str
    decls: tuple[StateDecl, ...] = ()
    code: tuple[CodeAccess, ...] = ()
    error: str = ""
    exports: tuple[tuple[str, str], ...] = ()
    classes: tuple[str, ...] = ()
    rebinds: frozenset[StateSite] = frozenset()
    _index: dict[int, list[CodeAccess]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def access_for(self, firstlineno: int, qualname: str | None = None) -> CodeAccess | None:
        """The accesses of the code object starting at ``firstlineno``.

        ``qualname`` may be ``co_qualname`` or, on Python 3.10, ``co_name``; it picks one
        of several code objects starting on the same line.  Without it, several candidates
        are merged into one conservative ``CodeAccess``.
        """
        index = self._index
        if not index and self.code:
            for access in self.code:
                index.setdefault(access.firstlineno, []).append(access)
        found = index.get(firstlineno)
        if not found:
            return None
        if qualname is not None:
            for access in found:
                if access.qualname == qualname:
                    return access
            for access in found:
                if access.qualname.rpartition(".")[2] == qualname:
                    return access
            return None
        if len(found) == 1:
            return found[0]
        reads: set[StateSite] = set()
        writes: dict[StateSite, int] = {}
        clears: set[StateSite] = set()
        other: set[StateSite] = set()  # written some other way by one of them
        for access in found:
            reads.update(access.reads)
            for site, line in access.writes.items():
                writes[site] = min(line, writes.get(site, line))
            clears |= access.clears
            other |= access.writes.keys() - access.clears
        return CodeAccess(
            found[0].qualname,
            firstlineno,
            frozenset(reads),
            FrozenMap(writes),
            frozenset(clears - other),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "modname": self.modname,
            "filename": self.filename,
            "decls": [[d.site, d.kind, d.lineno] for d in self.decls],
            "code": [c.to_json() for c in self.code],
            "error": self.error,
            "exports": [list(e) for e in self.exports],
            "classes": list(self.classes),
            "rebinds": sorted(self.rebinds),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModuleState:
        return cls(
            modname=str(data["modname"]),
            filename=str(data["filename"]),
            decls=tuple(StateDecl(str(s), str(k), int(n)) for s, k, n in data["decls"]),
            code=tuple(CodeAccess.from_json(c) for c in data["code"]),
            error=str(data.get("error", "")),
            exports=tuple((str(a), str(b)) for a, b in data.get("exports", ())),
            classes=tuple(str(c) for c in data.get("classes", ())),
            rebinds=frozenset(str(s) for s in data.get("rebinds", ())),
        )
