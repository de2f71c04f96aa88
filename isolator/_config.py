"""``[tool.isolator]`` in the project's pyproject.toml."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

_KEYS = {"reset", "fork", "track", "exclude", "exempt", "learn_memo", "keep"}
_MODES = ("none", "minimal", "full", "fork")


class ConfigError(Exception):
    """Bad ``[tool.isolator]`` table; the message is one line."""


# A NamedTuple, not a frozen dataclass: this module is imported by every pytest run that
# has isolator installed, and making a frozen dataclass costs about a millisecond.
class Settings(NamedTuple):
    reset: str | None = None
    fork: tuple[str, ...] = ()  # node ids / fnmatch patterns always run in a fork
    track: tuple[str, ...] = ()  # extra module prefixes whose state is tracked
    exclude: tuple[str, ...] = ()  # module prefixes never tracked
    exempt: tuple[str, ...] = ()  # directories whose files are not restored
    learn_memo: bool = True  # keep dict entries recomputed the same after a reset
    keep: tuple[str, ...] = ()  # sites (fnmatch) of pure memo dicts: additions are kept


def load(rootdir: Path) -> Settings:
    path = Path(rootdir) / "pyproject.toml"
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return Settings()
    except OSError as exc:
        raise ConfigError(f"isolator: cannot read {path}: {exc}") from None
    if b"isolator" not in raw:
        return Settings()  # no table of ours: not worth a TOML parser's import and parse
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 by tox
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"isolator: cannot read {path}: {exc}") from None
    table: Any = data.get("tool", {}).get("isolator", {})
    if not isinstance(table, dict):
        raise ConfigError(f"isolator: [tool.isolator] in {path} must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(
            f"isolator: unknown key(s) in [tool.isolator] of {path}: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    reset = table.get("reset")
    if reset is not None and reset not in _MODES:
        raise ConfigError(
            f"isolator: [tool.isolator] reset = {reset!r} in {path}; use one of {', '.join(_MODES)}"
        )

    def strings(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(
                f"isolator: [tool.isolator] {key} in {path} must be a list of strings"
            )
        return tuple(value)

    learn = table.get("learn_memo", True)
    if not isinstance(learn, bool):
        raise ConfigError(f"isolator: [tool.isolator] learn_memo in {path} must be true or false")
    return Settings(
        learn_memo=learn,
        keep=strings("keep"),
        reset=reset,
        fork=strings("fork"),
        track=strings("track"),
        exclude=strings("exclude"),
        exempt=tuple(str((Path(rootdir) / e).resolve()) for e in strings("exempt")),
    )
