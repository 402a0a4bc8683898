"""Did-you-mean suggestions for misspelled aliases, keywords, units and functions.

One place so every diagnostic phrases its suggestion the same way
(``... (did you mean s1?)``).  Case differences win over edit distance: ``S1``
for ``s1`` is found even though difflib alone would not.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``word`` (case-insensitive), or None if none is close."""
    by_lower: dict[str, str] = {}
    for c in candidates:
        by_lower.setdefault(c.lower(), c)
    low = word.lower()
    if low in by_lower and by_lower[low] != word:
        return by_lower[low]
    found = difflib.get_close_matches(low, [c for c in by_lower if c != low], n=1, cutoff=cutoff)
    return by_lower[found[0]] if found else None


def hint(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean X?)`` for the nearest candidate, or the empty string."""
    best = nearest(word, candidates, cutoff)
    return f" (did you mean {best}?)" if best else ""
