"""The ``.isolator/`` directory: atomic JSON files shared by the runner, detector and
scheduler."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: saves are not serialised
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from isolator._types import DependencyGraph

STORE_DIR = ".isolator"
DEPS_FILE = "deps.json"


class StoreError(Exception):
    """A file in ``.isolator/`` is missing or unreadable; the message is one line."""


def store_dir(rootdir: str | os.PathLike[str]) -> Path:
    return Path(rootdir) / STORE_DIR


def _create_beside(path: Path) -> tuple[int, str]:
    """A new file, opened for writing, in ``path``'s directory.  Not tempfile.mkstemp: its
    name generator is module state made on first use, which a write during a run (the
    fork list, saved after a test) would leave changed for the next test's check."""
    for _ in range(100):
        tmp = str(path.parent / f"{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as JSON so that readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def update_json(path: str | os.PathLike[str], update: Callable[[Any], Any]) -> None:
    """Replace the file's data with ``update(data)`` (``None`` when the file is missing or
    unreadable), holding an exclusive lock on ``path.lock`` from the read to the write:
    the workers of one pytest-xdist run each add their findings to the same file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            current = read_json(path)
        except StoreError:
            current = None
        write_json_atomic(path, update(current))


def read_json(path: str | os.PathLike[str]) -> Any:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise StoreError(f"{path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise StoreError(
            f"{path} is unreadable or corrupt ({exc.__class__.__name__}: {exc})"
        ) from None


def load_graph(rootdir: str | os.PathLike[str]) -> DependencyGraph:
    from isolator._types import DependencyGraph

    path = store_dir(rootdir) / DEPS_FILE
    data = read_json(path)
    try:
        return DependencyGraph.from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path} is not a valid dependency graph ({exc})") from None


def save_graph(rootdir: str | os.PathLike[str], graph: DependencyGraph) -> Path:
    path = store_dir(rootdir) / DEPS_FILE
    write_json_atomic(path, graph.to_json())
    return path
