"""Lark's parser for the grammar, its tables cached in a private per-user directory, never a shared temp dir.

Lark parses only what the table loop (``cep.lang.lalr``, on the shipped tables) rejects, to
locate the syntax error, and ``cep.lang.tablegen`` generates those tables with it; so
``lark`` is imported here, when first needed, not when ``cep`` starts.

Why the cache's place: Lark's ``cache=True`` keeps the LALR tables as a pickle under a predictable
name in the system temp directory, and loads it with ``pickle.load``.  Any
local user could plant that file first and run code as whoever runs ``cep``
next.  The cache lives instead in ``$XDG_CACHE_HOME/cep`` (default
``~/.cache/cep``), created with mode 0700, and is used only when that
directory belongs to the current user and nobody else can write to it;
otherwise there is no cache (start-up is slower, nothing else changes).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lark import Lark

_LARK: Lark | None = None


def grammar_text() -> str:
    """The grammar, read from the ``cep.grammar`` package data (works from a wheel)."""
    from importlib import resources

    return resources.files("cep.grammar").joinpath("pattern.lark").read_text(encoding="utf-8")


def lark_parser() -> Lark:
    """Lark's LALR parser for the grammar (built once, tables from the private cache when there)."""
    global _LARK
    if _LARK is None:
        from lark import Lark

        _LARK = Lark(
            grammar_text(),
            parser="lalr",
            lexer="basic",
            start=["start", "expr_only"],
            propagate_positions=True,
            maybe_placeholders=False,
            cache=lark_cache(),  # LALR tables in a private per-user dir: ~5x faster than computing them
        )
    return _LARK


def lark_cache() -> str | bool:
    """The ``cache`` argument for ``Lark(...)``: a private file path, or False (no cache)."""
    from cep.cachedir import private_dir

    directory = private_dir()
    if directory is None:
        return False
    import lark

    return os.path.join(directory, f"lark-{lark.__version__}-py{sys.version_info[0]}{sys.version_info[1]}.tables")
