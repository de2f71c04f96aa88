"""The static pass: module-level mutable state and, for each code object, the state it
reads and writes, found from source text without importing the analysed code."""

from __future__ import annotations

from isolator.analysis._ast_state import analyze_source
from isolator.analysis._model import (
    DECL_KINDS,
    CodeAccess,
    ModuleState,
    StateDecl,
    sites_overlap,
)
from isolator.analysis._tree import analyze_file, analyze_tree, modname_for_path

__all__ = [
    "DECL_KINDS",
    "CodeAccess",
    "ModuleState",
    "StateDecl",
    "analyze_file",
    "analyze_source",
    "analyze_tree",
    "modname_for_path",
    "sites_overlap",
]
