"""Attributes that code stores on typing's generic aliases.

typing memoizes its aliases: ``Box[int]`` is one object however often it is spelled, and
libraries keep their own data on it (attrs' ``fields()`` sets ``__attrs_attrs__`` on the
alias it is given, and cattrs then takes the alias for an attrs class of its own).  An
alias made before a test (at the import of a test module, as a ``parametrize`` value, a
module global or an annotation) is the same object for every later test, yet no tracked
state leads to it: it is an object of a library class, held by typing's caches and by
pytest's marks.  A fresh process has it bare.

typing's aliases bind their attributes through their own Python ``__setattr__`` (the base
class of every alias, ``typing._BaseGenericAlias``, routes dunder names to the alias and
others to the class it aliases).  That method is wrapped while isolator runs, and tells
apart, by the caller's code, an alias being made (its class's own ``__init__`` binds
``__origin__``, ``__args__``...):

- an attribute that a test binds on (or deletes from) an alias made *before* it goes to
  the undo log with its old value, as a library module's attribute does, and is put back
  after the test;
- an alias made *during* the test is new: what code binds on it stays (a library that
  keeps it in a cache of its own keeps it whole), and ``STATE.annotated`` says that
  typing's caches, which would hand it to later tests, must be emptied after the test
  (their sizes do not tell once they are full).

Outside tests the wrapper costs one flag test a write.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable
from typing import Any, Final

_BASE: Final = getattr(typing, "_BaseGenericAlias", None)
_WRAPPED: Final = "__isolator_wrapped__"  # (on our wrappers: the method they wrap)


class _State:
    """``made``: ids of the aliases made since the last :meth:`settle` (a made alias
    lives on, or its id goes to another alias made later); ``annotated``: code bound an
    attribute on one of them after it was made."""

    def __init__(self) -> None:
        self.made: set[int] = set()
        self.annotated = False

    def settle(self) -> bool:
        """Whether an alias made since the last call was annotated; from now on the
        aliases made so far count as made before."""
        annotated = self.annotated
        if self.made:
            self.made.clear()
            self.annotated = False
        return annotated


STATE: Final = _State()


def install(log: Any, notset: object) -> bool:
    """Wrap the aliases' ``__setattr__`` (and add a ``__delattr__``) so that a write made
    while ``log.active`` is noted in ``log`` (an ``UndoLog``).  False where typing has no
    such Python method (another implementation): nothing is watched then."""
    cls = _BASE
    if not isinstance(cls, type):
        return False
    own = cls.__dict__
    setter = own.get("__setattr__")
    if not isinstance(setter, types.FunctionType):
        return False
    if hasattr(setter, _WRAPPED):
        return True  # (installed already: a second resetter in one process)
    deleter = own.get("__delattr__")
    base_delete: Callable[[Any, str], None] = (
        deleter if isinstance(deleter, types.FunctionType) else object.__delattr__
    )
    set_attr: Callable[[Any, str, object], None] = setter
    inits: dict[type, frozenset[types.CodeType]] = {}
    getframe = sys._getframe

    def made_by(tp: type) -> frozenset[types.CodeType]:
        """The code of the ``__init__`` methods of an alias class: an alias being made
        binds its own attributes there (``__origin__``, ``__args__``...)."""
        codes = inits[tp] = frozenset(
            f.__code__
            for k in tp.__mro__
            if isinstance(f := k.__dict__.get("__init__"), types.FunctionType)
        )
        return codes

    made = STATE.made
    state = STATE

    def __setattr__(self: Any, attr: str, val: object) -> None:
        if not log.active:
            set_attr(self, attr, val)
            return
        d = self.__dict__
        if "__origin__" not in d:
            # Being made (every alias has __origin__ once _BaseGenericAlias.__init__
            # has bound it): made during this test.
            made.add(id(self))
            set_attr(self, attr, val)
            return
        if id(self) in made:
            # Made during this test: its class's __init__ finishing it, or code (a
            # library) annotating a new alias, which typing's caches must not hand on.
            tp = type(self)
            if getframe(1).f_code not in (inits.get(tp) or made_by(tp)):
                state.annotated = True
            set_attr(self, attr, val)
            return
        # Made before this test: what it binds is put back after it.
        old = d.get(attr, notset)
        set_attr(self, attr, val)
        if d.get(attr, notset) is not old:  # (a name typing binds on the aliased class: not here)
            log.note(self, attr, old)

    def __delattr__(self: Any, attr: str) -> None:
        if log.active:
            if id(self) in made:
                state.annotated = True
            else:
                log.note(self, attr, self.__dict__.get(attr, notset))
        base_delete(self, attr)

    setattr(__setattr__, _WRAPPED, setter)
    setattr(__delattr__, _WRAPPED, deleter)
    type.__setattr__(cls, "__setattr__", __setattr__)
    type.__setattr__(cls, "__delattr__", __delattr__)
    return True


def uninstall() -> None:
    """Put typing's own methods back."""
    cls = _BASE
    if not isinstance(cls, type):
        return
    own = cls.__dict__
    setter = own.get("__setattr__")
    if not hasattr(setter, _WRAPPED):
        return
    type.__setattr__(cls, "__setattr__", getattr(setter, _WRAPPED))
    deleter = own.get("__delattr__")
    was = getattr(deleter, _WRAPPED, None)
    if was is None:
        type.__delattr__(cls, "__delattr__")
    else:
        type.__setattr__(cls, "__delattr__", was)


def is_alias(owner: object) -> bool:
    return _BASE is not None and isinstance(owner, _BASE)


def site_of(alias: object, name: str) -> str:
    """``module:Class[args].name``, from the module of the class the alias stands for
    (``tests.test_x:Box[int].__attrs_attrs__``): a test that reads ``Box`` may read it."""
    try:
        text = repr(alias)
    except Exception:  # (an argument's own repr failing: the site is only a name)
        text = f"typing.{type(alias).__name__}"
    origin = getattr(alias, "__origin__", None)
    module = getattr(origin, "__module__", None)
    if isinstance(module, str) and text.startswith(module + "."):
        return f"{module}:{text[len(module) + 1 :]}.{name}"
    head, bracket, rest = text.partition("[")
    module, _, short = head.rpartition(".")
    return f"{module or 'typing'}:{short}{bracket}{rest}.{name}"
