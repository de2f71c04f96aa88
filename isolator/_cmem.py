"""Raw memory reads and C-API calls, made on ``_ctypes`` directly.

isolator reads a few words of CPython objects (dict version tags and entry tables, slot
areas, the Mersenne Twister's position) and calls a few C-API functions (type watchers,
``PyContext_Enter``).  ``import ctypes`` costs about 0.9 ms on top of the ``_ctypes``
extension in every resetting run: its module builds dozens of types, a library loader
and the handle of the Python library.  The handful of types and functions needed here
are made the way ctypes makes them, from the same extension.  Where that is not possible
(no ``_ctypes`` names of the kind, a platform without ``dlopen``), ctypes itself is used.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

__all__ = [
    "c_char",
    "c_int",
    "c_uint32",
    "c_uint64",
    "c_void_p",
    "py_object",
    "pyfunctype",
    "pythonapi_function",
    "sizeof",
    "string_at",
]

if TYPE_CHECKING:
    from ctypes import (
        c_char,
        c_int,
        c_uint32,
        c_uint64,
        c_void_p,
        py_object,
        sizeof,
    )

    def string_at(address: int, size: int) -> bytes: ...

    _PYTHONAPI_FLAGS: int
    _LITE: bool
else:
    try:
        from _ctypes import (
            FUNCFLAG_CDECL,
            FUNCFLAG_PYTHONAPI,
            CFuncPtr,
            _SimpleCData,
            _string_at_addr,
            sizeof,
        )

        def _simple(name: str, code: str) -> type:
            """A simple C type, as ctypes defines each (``_type_``: its struct code)."""
            return type(name, (_SimpleCData,), {"_type_": code})

        c_char = _simple("c_char", "c")
        c_int = _simple("c_int", "i")
        c_uint32 = _simple("c_uint32", "I")
        c_uint64 = _simple("c_uint64", "Q")
        c_void_p = _simple("c_void_p", "P")
        py_object = _simple("py_object", "O")

        _PYTHONAPI_FLAGS = FUNCFLAG_CDECL | FUNCFLAG_PYTHONAPI

        class _StringAt(CFuncPtr):
            _argtypes_ = (c_void_p, c_int)
            _restype_ = py_object
            _flags_ = _PYTHONAPI_FLAGS

        string_at = _StringAt(_string_at_addr)
        _LITE = True
    except (ImportError, AttributeError):  # pragma: no cover  (other implementations)
        from ctypes import (
            c_char,
            c_int,
            c_uint32,
            c_uint64,
            c_void_p,
            py_object,
            sizeof,
            string_at,
        )

        _PYTHONAPI_FLAGS = 0
        _LITE = False


class _Library:
    """The running interpreter's own symbols, as ``ctypes.pythonapi`` finds them."""

    def __init__(self, handle: int):
        self._handle = handle


# (this interpreter's symbols: a _Library, or ctypes.pythonapi; the type of its functions)
_API: list[Any] = []


def pythonapi_function(name: str) -> Any:
    """The C-API function ``name`` of this interpreter, called with the GIL held and
    returning a C ``int`` until its ``restype`` is set (``ctypes.pythonapi.<name>``).
    Raises AttributeError where there is no such function."""
    if not _API:
        _API.extend(_pythonapi())
    api, fn_type = _API
    if fn_type is None:
        return getattr(api, name)
    try:
        return fn_type((name, api))
    except (AttributeError, OSError):
        raise AttributeError(name) from None


def _pythonapi() -> tuple[Any, Any]:
    if _LITE and os.name == "posix":
        try:
            from _ctypes import RTLD_LOCAL, CFuncPtr, dlopen

            fn_type = type(
                "_PythonAPIFunction",
                (CFuncPtr,),
                {"_flags_": _PYTHONAPI_FLAGS, "_restype_": c_int},
            )
            return _Library(dlopen(None, RTLD_LOCAL)), fn_type  # type: ignore[arg-type]
        except (ImportError, OSError):  # pragma: no cover
            pass
    import ctypes

    return ctypes.pythonapi, None


def pyfunctype(restype: Any, *argtypes: Any) -> Any:
    """A type of C function pointers to Python callables, called with the GIL held
    (``ctypes.PYFUNCTYPE``)."""
    if not _LITE:  # pragma: no cover
        import ctypes

        return ctypes.PYFUNCTYPE(restype, *argtypes)
    from _ctypes import CFuncPtr

    return type(
        "_PythonCallback",
        (CFuncPtr,),
        {"_argtypes_": argtypes, "_restype_": restype, "_flags_": _PYTHONAPI_FLAGS},
    )
