"""Where the parser's tables are cached: a private per-user directory, never a shared temp dir.

Why: Lark's ``cache=True`` keeps the LALR tables as a pickle under a predictable
name in the system temp directory, and loads it with ``pickle.load``.  Any
local user could plant that file first and run code as whoever runs ``cep``
next.  The cache lives instead in ``$XDG_CACHE_HOME/cep`` (default
``~/.cache/cep``), created with mode 0700, and is used only when that
directory belongs to the current user and nobody else can write to it;
otherwise there is no cache (start-up is slower, nothing else changes).
"""

from __future__ import annotations

import os
import stat
import sys


def lark_cache() -> str | bool:
    """The ``cache`` argument for ``Lark(...)``: a private file path, or False (no cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "cep")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.stat(directory, follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return False
    import lark

    return os.path.join(directory, f"lark-{lark.__version__}-py{sys.version_info[0]}{sys.version_info[1]}.tables")
