"""Copy-on-write protection of files a test writes outside its own temporary directories.

An audit hook sees Python's file operations (``open`` for writing, ``os.remove``,
``os.rename``, ``os.mkdir``, ``shutil.rmtree`` ...).  Before the first write to a path
during a test, the original is copied aside (or noted as absent); after the test it is
put back.  A journal on disk lists the backups, so that if the process dies mid-test the
next run restores the user's files instead of losing them.
"""

from __future__ import annotations

import gc
import io
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from isolator._process import limits_written as _limits_written

T = TypeVar("T")
_dumps = json.dumps  # our own reference: a test may monkeypatch json
JOURNAL: Final = "journal.jsonl"
_OLD_JOURNAL: Final = "journal.json"

_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS: Final = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.utime": (0,),
    "os.rename": (0, 1),
    "os.link": (1,),
    "os.symlink": (1,),
    "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
    # Changes no file, but where relative paths lead: counted in ``writes`` only.
    "os.chdir": (),
}
# Events that change or remove what is at the path and make nothing where nothing is.
_CHANGES_ONLY: Final = frozenset(
    {"os.remove", "os.rmdir", "os.truncate", "os.chmod", "os.utime", "shutil.rmtree"}
)
# Events that start a process: only after one does the resetter look for leaked children.
_SPAWN_EVENTS: Final = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn"})
# Processes run to their end (no child left behind), which may have written files.
_RUN_EVENTS: Final = frozenset({"os.system", "os.spawn"})
# Resource limits changed (the process probe reads them only after one: see
# _process.limits_written).
_LIMIT_EVENTS: Final = frozenset({"resource.setrlimit", "resource.prlimit"})
_EVENTS: Final = (
    frozenset(_PATH_EVENTS)
    | {"open", "object.__setattr__"}
    | _SPAWN_EVENTS
    | _RUN_EVENTS
    | _LIMIT_EVENTS
)
# Rebinding a function's defaults is audited: the resetter skips reading every function's
# defaults after a test in which no such event happened (each read is an audit event too).
_DEFAULTS_NAMES: Final = frozenset({"__defaults__", "__kwdefaults__"})
# Events that can destroy a directory's contents: only these copy a tree aside.
_TREE_EVENTS: Final = frozenset({"os.rmdir", "os.rename", "shutil.rmtree", "shutil.move"})
_MAX_TREE_BYTES: Final = 64 * 1024 * 1024
# Files a child process writes are out of the audit hook's sight: after a test that
# started a process, the project's tree is listed and compared with the listing before
# (the one after the last such test, or one taken at the first process start).  Only
# entries changed since the test's first process start (by their ctime, which no code
# sets) count: what an earlier test's writes were put back to is not the child's doing.
# Directories tools fill on their own (version control, caches, virtual environments) are
# not looked into, and a tree of more files than the limit is not listed at all (said
# once in the summary).
_UNSCANNED_NAMES: Final = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
     ".tox", ".nox", ".eggs", "node_modules", ".isolator"}
)  # fmt: skip
# File times come from a clock that lags the one read here by up to a tick.
_CLOCK_SLACK_NS: Final = 50_000_000
TREE_SCAN_LIMIT: Final = 20_000

_MODULES: Final = sys.modules
# Our own references, taken at import: the guard runs inside tests, and a test that
# patches os.replace, open or shutil.copy2 (mock.patch) must not have its mock called by
# isolator (jsonpatch's tests make os.replace raise).
_abspath = os.path.abspath
_exists = os.path.lexists
_isdir = os.path.isdir
_islink = os.path.islink
_join = os.path.join
_makedirs = os.makedirs
_stat = os.stat
_getpid = os.getpid
_fsdecode = os.fsdecode
_fspath = os.fspath
_copy2 = shutil.copy2
_copytree = shutil.copytree
_open = io.open
_scandir = os.scandir


def _time_ns(clock: Callable[[], int] = time.time_ns) -> int:
    """The original ``time.time_ns``, held as a default: freezegun's ``start()`` rebinds
    every module global that is the real clock to its fake, and a child process started
    under a freeze would be compared with the frozen time."""
    return clock()


class FileGuard:
    """Journal of originals for the files written during the current test.

    ``entries``: path -> ("absent", "") | ("file", backup) | ("dir", backup)
    ``unrestorable``: (path, reason) collected since the last restore.
    """

    def __init__(self, backup_dir: str, exempt: list[str]):
        self.backup_dir = backup_dir
        self.exempt = tuple(os.path.join(_abspath(e), "") for e in exempt) + (
            os.path.join(_abspath(backup_dir), ""),
            "/dev/",
            "/proc/",
            "/sys/",
        )
        self.active = False
        self.entries: dict[str, tuple[str, str]] = {}
        self.order: list[str] = []
        self.unrestorable: list[tuple[str, str]] = []
        self._n = 0
        self._busy = False
        # Entries a higher-scoped fixture's frame holds (take_since) until its teardown
        # gives them back: their backups and journal lines outlive the tests in between.
        self.held: dict[str, tuple[str, str]] = {}
        self._journal_file: Any = None  # open while the journal has entries
        self._owner = os.getpid()  # a forked child keeps a journal of its own
        self._inherited: set[str] = set()  # held entries a forked child got from its parent
        self.defaults_written = False  # a function's __defaults__/__kwdefaults__ was set
        self.code_written = False  # a function's __code__ was set
        # An object's __class__ was assigned (the same audit event): until then the
        # watched instances' classes need no look.  True until the first check has looked.
        self.class_written = True
        self.spawned = False  # the test started a process
        # Files written by child processes (see child_writes): the roots listed, their
        # last listing, the time of the current test's first process start (None: none
        # started), the paths put back or written here since the listing, and whether a
        # tree had too many files to list.
        self.scan_roots: tuple[str, ...] = ()
        self.tree: dict[str, tuple[int, int, int, int]] | None = None
        self.spawned_at: int | None = None
        self._since_tree: set[str] = set()
        self.tree_too_large = False
        # Told of each class whose __bases__ a test assigns, before the assignment (the
        # bases are no entry of the class's __dict__: nothing else sees them change).
        self.bases_written: Callable[[type], None] | None = None
        # Events that may have changed a file anywhere (tmp dirs, pytest's and isolator's
        # own writes included) or started a process that may, and changes of directory:
        # the import finder looks at an unloaded module's file, and at the current
        # directory, again only after one (see UnloadedFinder._rewritten, _cwd).
        self.writes = 0
        # One line per saved path, appended as each is saved: a test that writes a
        # thousand files pays for a thousand lines, not for a thousand whole journals.
        self.journal = os.path.join(backup_dir, JOURNAL)
        self._journal_pid = self._owner  # the process whose journal ``journal`` is
        # Files a test created and left open in an object still alive (a
        # NamedTemporaryFile in a reference cycle): removed once closed, since the object
        # removes or writes its file itself then (removed under it, it raised).
        # Journaled, as a held entry is.  path -> (kind, backup, the process's pid).
        self.pending: dict[str, tuple[str, str, int]] = {}

    def install(self) -> None:
        # A plain function, not the bound method: every audited event of the process
        # (each id() call raises one) pays for the call, and a bound method as a hook costs
        # several times a function's.  Events of no interest leave at the first test.
        events, hook = _EVENTS, self._hook

        def audit(event: str, args: tuple[Any, ...]) -> None:
            if event in events:
                hook(event, args)

        sys.addaudithook(audit)

    def exempt_dir(self, path: str) -> None:
        """Writes under ``path`` are the tests' own from now on (a directory made late)."""
        self.exempt += (os.path.join(_abspath(path), ""),)

    def unguarded(self, make: Callable[[], T]) -> T:
        """``make()`` with its file writes not journaled (the test runner's own, mid-test)."""
        was = self._busy
        self._busy = True
        try:
            return make()
        finally:
            self._busy = was

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "object.__setattr__":
            if self.active and not self._busy and len(args) > 1:
                if args[1] in _DEFAULTS_NAMES:
                    self.defaults_written = True
                elif args[1] == "__code__":
                    self.code_written = True
                elif args[1] == "__class__":
                    self.class_written = True
                elif args[1] == "__bases__" and isinstance(args[0], type):
                    if self.bases_written is not None:
                        self.bases_written(args[0])
            return
        if event == "open":
            path, mode, flags = args
            if mode is None:
                if not (flags or 0) & _WRITE_FLAGS:
                    return
            elif not any(c in mode for c in "wax+"):
                return
            self.writes += 1
            if self.active and not self._busy:
                self._before_write(path, event)
            return
        if event in _LIMIT_EVENTS:
            _limits_written()
            return
        self.writes += 1
        if not self.active or self._busy:
            return
        if event in _SPAWN_EVENTS or event in _RUN_EVENTS:
            if event in _SPAWN_EVENTS:
                self.spawned = True
            if self.spawned_at is None and self.scan_roots and not self.tree_too_large:
                if self.tree is None:
                    self.tree = self._list_tree()
                self.spawned_at = _time_ns()
            return
        for i in _PATH_EVENTS[event]:
            if i < len(args):
                self._before_write(args[i], event)

    def _list_tree(self) -> dict[str, tuple[int, int, int, int]] | None:
        """The scanned roots' listing; None where it is too large, or where listing raised:
        it runs inside the test's own call that starts a process, and a checker of the
        test's (one that forbids blocking calls while an event loop runs) must not fail
        that call for our scan.  Without a listing, that test's children are not looked
        at."""
        was, self._busy = self._busy, True
        try:
            tree = scan_tree(self.scan_roots, self.exempt)
        except Exception:
            return None
        finally:
            self._busy = was
        self._since_tree.clear()
        if tree is None:
            self.tree_too_large = True
        return tree

    def retake_tree(self) -> None:
        """What the processes started so far wrote is the baseline's (a higher-scoped
        fixture started them during the test's set-up)."""
        if self.spawned_at is not None:
            self.tree = self._list_tree()

    def child_writes(self) -> list[tuple[str, str]]:
        """Files of the scanned roots that a child process of the test created, changed
        or deleted: (path, "created" | "changed" | "deleted"), read after a test that
        started one.  Paths this process wrote (journaled, put back) are not among them,
        nor files it holds open (its output redirected to a file, a log handler's)."""
        started, self.spawned_at = self.spawned_at, None
        before = self.tree
        if started is None or before is None:
            return []
        own = self._since_tree | set(self.pending)
        after = self.tree = self._list_tree()
        if after is None:
            return []
        since = started - _CLOCK_SLACK_NS
        out = [
            (p, "created" if p not in before else "changed")
            for p, stamp in after.items()
            if stamp[3] >= since and before.get(p) != stamp and p not in own
        ]
        if out:
            held = _open_files([p for p, _ in out])
            out = [(p, what) for p, what in out if p not in held]
        out += [(p, "deleted") for p in before.keys() - after.keys() if p not in own]
        return sorted(out)

    def _before_write(self, path: object, event: str) -> None:
        if os is not _MODULES.get("os") or shutil is not _MODULES.get("shutil"):
            # A fake filesystem replaced this module's os or shutil (pyfakefs, when it did
            # not skip isolator): the path is a fake one, and nothing here would reach
            # the disk.
            return
        if isinstance(path, bytes):
            path = _fsdecode(path)
        if not isinstance(path, str):
            try:
                path = _fspath(path)  # type: ignore[call-overload]
            except TypeError:
                return  # a file descriptor: the file was opened (and saved) before
            if not isinstance(path, str):
                return
        path = _abspath(path)
        if (
            path in self.entries
            or (path + os.sep).startswith(self.exempt)
            or "__pycache__" in path
            or path in self.pending  # (an earlier test's, removed once closed)
        ):
            return
        self._busy = True
        try:
            self._save(path, event)
        except Exception as exc:
            # Never into the test (a mock the test set may have been reached after all):
            # the original could not be kept, which is reported.
            self.entries.setdefault(path, ("skip", ""))
            self.unrestorable.append(
                (path, f"its original could not be saved ({type(exc).__name__}: {exc})")
            )
        finally:
            self._busy = False

    def _save(self, path: str, event: str) -> None:
        if not _exists(path):
            if event in _CHANGES_ONLY:
                # Nothing there changes: nothing to put back.  Noted as absent, a file the
                # caller then makes unseen (sqlite, after coverage erases its data file
                # on first use in a plugin's set-up hook) would be removed under it.
                return
            self.entries[path] = ("absent", "")
        elif _isdir(path) and not _islink(path):
            if event not in _TREE_EVENTS:
                return  # mkdir of an existing directory, chmod/utime: nothing to save

            size = _tree_size(path)
            if size > _MAX_TREE_BYTES:
                self.entries[path] = ("skip", "")
                self.unrestorable.append((path, f"directory too large to copy ({size} bytes)"))
                return
            dest = self._backup_path()
            _makedirs(self.backup_dir, exist_ok=True)
            _copytree(path, dest, symlinks=True)
            self.entries[path] = ("dir", dest)
        else:
            dest = self._backup_path()
            _makedirs(self.backup_dir, exist_ok=True)
            try:
                _copy2(path, dest, follow_symlinks=False)
            except OSError as exc:
                self.entries[path] = ("skip", "")
                self.unrestorable.append((path, f"cannot copy: {exc.strerror or exc}"))
                return
            self.entries[path] = ("file", dest)
        self.order.append(path)
        self._write_journal()

    def _backup_path(self) -> str:
        """A new backup's path: a forked child's names carry its pid, so that the parent's
        next backups (numbered on from where the child's numbers started) never replace
        the backups of a child that crashed, which its journal still names."""
        self._n += 1
        pid = _getpid()
        name = str(self._n) if pid == self._owner else f"{pid}-{self._n}"
        return _join(self.backup_dir, name)

    def recover_children(self) -> list[str]:
        """Put back the files of forked children that died mid-test (their journals are
        left behind: a child that ends removes its own); returns the restored paths."""
        restored: list[str] = []
        try:
            names = os.listdir(self.backup_dir)
        except OSError:
            return restored
        for name in names:
            pid = name[len("journal-") : -len(".jsonl")]
            if not (name.startswith("journal-") and name.endswith(".jsonl") and pid.isdigit()):
                continue
            if int(pid) == _getpid() or alive(int(pid)):
                continue
            was, self._busy = self._busy, True  # putting files back is no test's write
            try:
                restored += _recover_file(_join(self.backup_dir, name))
            finally:
                self._busy = was
        return restored

    def _write_journal(self) -> None:
        """Append the entry of the path just saved.  The process may die in the middle of
        the append: the write it was about to let through has not happened then, so a
        last line cut short names nothing to restore (the recovery skips it)."""
        path = self.order[-1]
        self._journal().write(_dumps([path, *self.entries[path]]) + "\n")
        self._journal_file.flush()  # in the kernel's hands before the write it guards

    def _journal(self) -> Any:
        """The journal of this process, open for appending."""
        f = self._journal_file
        pid = _getpid()
        if self._journal_pid != pid:
            # A forked child (a test run in a fork): it keeps a journal of its own, which
            # it removes when it puts its files back; the parent's (the same open file,
            # inherited) must outlive that.
            if f is not None:
                f.close()
                f = self._journal_file = None
            self.journal = os.path.join(self.backup_dir, f"journal-{pid}.jsonl")
            self._journal_pid = pid
            self._inherited = set(self.held)  # the parent's: in the parent's journal
        if f is None:
            _makedirs(self.backup_dir, exist_ok=True)
            f = self._journal_file = _open(self.journal, "a", encoding="utf-8")
        return f

    def dirty_sites(self) -> list[str]:
        return [f"<file>:{p}" for p in self.order if self._changed(p)]

    def _changed(self, path: str) -> bool:
        kind, backup = self.entries[path]
        if kind == "absent":
            return _exists(path)
        if kind == "file":
            if not _exists(path) or _isdir(path):
                return True
            try:
                a, b = _stat(path), _stat(backup)
            except OSError:
                return True
            if a.st_size != b.st_size or a.st_mode != b.st_mode:
                return True
            return _read(path) != _read(backup)
        return kind == "dir"

    def restore(self) -> list[str]:
        """Put every saved path back; returns the sites that were restored.  A file the
        test created that the process still holds open is left until it is closed (see
        ``pending`` and :meth:`settle`)."""
        if not self.order:
            return []
        if self.tree is not None:
            self._since_tree.update(self.order)  # (not a child's doing: see child_writes)
        self._busy = True
        restored: list[str] = []
        items = [(p, *self.entries[p]) for p in self.order]
        created = [p for p, kind, _ in items if kind == "absent" and _exists(p)]
        held_open = _open_files(created) if created else set()
        if held_open:
            pid = _getpid()
            for p, kind, backup in items:
                if p in held_open:
                    self.pending[p] = (kind, backup, pid)
            items = [item for item in items if item[0] not in held_open]
            restored += [f"<file>:{p}" for p in held_open]
        try:
            restored += restore_entries(items, self.unrestorable)
        finally:
            self.entries.clear()
            self.order.clear()
            try:
                self._rewrite_journal()
                # Only these entries' backups: the held ones are a fixture frame's.
                for _, kind, backup in items:
                    if kind in ("file", "dir") and backup:
                        _remove(backup)
            finally:
                self._busy = False
        return restored

    def _rewrite_journal(self) -> None:
        """The journal lists the held entries only (none: it is removed)."""
        if self._journal_file is not None:
            self._journal_file.close()
            self._journal_file = None
        pid = _getpid()
        inherited = self._inherited
        if self._journal_pid == pid:
            _remove(self.journal)
        else:
            inherited = set(self.held)  # a forked child that saved nothing: all its parent's
        own = [(p, *self.held[p]) for p in self.held if p not in inherited]
        own += [(p, kind, backup) for p, (kind, backup, _) in self.pending.items()]
        if own:
            f = self._journal()
            for entry in own:
                f.write(_dumps(list(entry)) + "\n")
            f.flush()

    def _remove_pending(self, closed_only: bool) -> None:
        """Remove the pending files of this process that are gone or (unless
        ``closed_only``) still there; those still open stay pending."""
        pid = _getpid()
        mine = [p for p, (_, _, owner) in self.pending.items() if owner == pid]
        there = [p for p in mine if _exists(p)]
        still_open = _open_files(there) if closed_only and there else set()
        done = [p for p in mine if p not in still_open]
        if not done:
            return
        was, self._busy = self._busy, True
        try:
            for p in done:
                del self.pending[p]
            if self.tree is not None:
                self._since_tree.update(done)
            restore_entries([(p, "absent", "") for p in done], self.unrestorable)
            self._rewrite_journal()
        finally:
            self._busy = was

    def settle(self) -> None:
        """Remove the pending files that were closed since."""
        self._remove_pending(closed_only=True)

    def finish(self) -> None:
        """At the end of the run: the files still pending are removed (an object that
        still holds one is let go first, where it is garbage)."""
        if self.pending:
            gc.collect()
            self._remove_pending(closed_only=False)

    def take_since(self, n: int) -> list[tuple[str, str, str]]:
        """Remove and return the entries saved after the first ``n`` (for fixture scopes):
        held (their backups kept, their journal lines too) until given back."""
        taken = self.order[n:]
        del self.order[n:]
        out = [(p, *self.entries.pop(p)) for p in taken]
        for p, kind, backup in out:
            self.held.setdefault(p, (kind, backup))
        return out

    def give_back(self, items: list[tuple[str, str, str]]) -> None:
        # The older original wins: it is what the path held before the fixture ran.
        for p, kind, backup in items:
            if self.held.get(p) == (kind, backup):
                del self.held[p]
            if p not in self.entries:
                self.order.append(p)
            else:
                _, newer = self.entries[p]
                if newer and newer != backup:
                    _remove(newer)  # a copy of what the fixture left: not needed
            self.entries[p] = (kind, backup)
            # (Its journal line is already there, before any later one for the path.)


def _open_files(paths: list[str]) -> set[str]:
    """Those of ``paths`` that this process holds open (read from /proc/self/fd; none
    where that cannot be read)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return set()
    targets = set()
    for fd in fds:
        try:
            targets.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return {p for p in paths if p in targets or os.path.realpath(p) in targets}


def restore_entries(
    items: list[tuple[str, str, str]], problems: list[tuple[str, str]]
) -> list[str]:
    """Restore (path, kind, backup) items: removals deepest first, then copies."""
    restored = []
    for path, kind, _ in sorted(items, key=lambda t: -t[0].count(os.sep)):
        if kind == "absent" and _exists(path):
            try:
                _remove(path)
                restored.append(f"<file>:{path}")
            except OSError as exc:
                problems.append((path, f"cannot remove: {exc.strerror or exc}"))
    for path, kind, backup in sorted(items, key=lambda t: t[0].count(os.sep)):
        if kind not in ("file", "dir"):
            continue
        try:
            if kind == "file":
                if _exists(path) and _isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                if _exists(path) and _same_file(path, backup):
                    # The same bytes (rewritten, or only touched by os.utime): the
                    # original's modification time, which a fresh process would see.
                    if _restore_mtime(path, backup):
                        restored.append(f"<file>:{path}")
                    continue
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if os.path.islink(path):
                    os.unlink(path)
                shutil.copy2(backup, path, follow_symlinks=False)
            else:
                if _exists(path):
                    _remove(path)
                shutil.copytree(backup, path, symlinks=True)
            restored.append(f"<file>:{path}")
        except OSError as exc:
            problems.append((path, f"cannot restore: {exc.strerror or exc}"))
    return restored


def recover_journal(backup_dir: str) -> list[str]:
    """Restore files left by a run that died mid-test; returns the restored paths."""
    restored: list[str] = []
    try:
        # Forked children's journals (journal-PID.jsonl) first: their writes came after
        # the parent's entries they inherited.
        children = sorted(n for n in os.listdir(backup_dir) if n.startswith("journal-"))
    except OSError:
        return []
    for name in (*children, JOURNAL, _OLD_JOURNAL):
        restored += _recover_file(os.path.join(backup_dir, name))
    return restored


def _recover_file(journal: str) -> list[str]:
    """Restore what one journal names, then remove it and the backups it names."""
    if not os.path.exists(journal):
        return []
    try:
        with open(journal, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    items = _journal_items(text)
    if items is None:
        return []
    problems: list[tuple[str, str]] = []
    restored = restore_entries(items, problems)
    _remove(journal)
    for _, kind, backup in items:
        if kind in ("file", "dir") and backup and os.path.lexists(backup):
            _remove(backup)
    return restored


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def _journal_items(text: str) -> list[tuple[str, str, str]] | None:
    """The entries of a journal: a line ``[path, kind, backup]`` each (a line cut short by
    a crash is skipped; a path's first line wins), or one JSON list of them (journals that
    earlier versions wrote whole).  None: not a journal."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, list) and all(isinstance(e, list) and len(e) == 3 for e in whole):
        return [(str(a), str(b), str(c)) for a, b, c in whole]
    items: dict[str, tuple[str, str, str]] = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry):
            # A path saved again later (after a fixture's scope took its first entry) is
            # restored from its first backup: what it held before the run touched it.
            items.setdefault(entry[0], (entry[0], entry[1], entry[2]))
    return list(items.values())


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return sa.st_size == sb.st_size and sa.st_mode == sb.st_mode and _read(a) == _read(b)


def _restore_mtime(path: str, backup: str) -> bool:
    """Give ``path`` the modification time of its backup (a copy that kept the
    original's); its access time stays.  Whether it differed."""
    now, then = os.stat(path, follow_symlinks=False), os.stat(backup, follow_symlinks=False)
    if now.st_mtime_ns == then.st_mtime_ns:
        return False
    os.utime(path, ns=(now.st_atime_ns, then.st_mtime_ns), follow_symlinks=False)
    return True


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def remove_empty_dir(path: str) -> None:
    """Remove backup directory ``path`` when it is there and empty (a run's own at its end,
    a dead run's once its journal is recovered); one still holding backups stays."""
    try:
        os.rmdir(path)
    except OSError:
        pass  # not there, or not empty


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def _tree_size(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
        if total > _MAX_TREE_BYTES:
            break
    return total


def scan_tree(
    roots: tuple[str, ...], exempt: tuple[str, ...] = (), limit: int = TREE_SCAN_LIMIT
) -> dict[str, tuple[int, int, int, int]] | None:
    """path -> (mtime in ns, size, inode, ctime in ns) of every file under ``roots``,
    symbolic links not followed, leaving out the directories no test's data is in
    (``_UNSCANNED_NAMES``, virtual environments, paths under ``exempt``).  None: more than
    ``limit`` files."""
    out: dict[str, tuple[int, int, int, int]] = {}
    todo = [r for r in roots if not _join(r, "").startswith(exempt)]
    while todo:
        top = todo.pop()
        try:
            with _scandir(top) as it:  # closed even when a test's patch raises mid-way
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    path = e.path
                    if (
                        e.name in _UNSCANNED_NAMES
                        or _join(path, "").startswith(exempt)
                        or _exists(_join(path, "pyvenv.cfg"))
                    ):
                        continue
                    todo.append(path)
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue  # (gone since it was listed)
            out[e.path] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
            if len(out) > limit:
                return None
    return out
