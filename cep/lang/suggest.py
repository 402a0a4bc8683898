"""Did-you-mean suggestions for misspelled aliases, keywords, units and functions.

One place so every diagnostic phrases its suggestion the same way
(``... (did you mean s1?)``).  A candidate is close when it differs only in
case, or is within a small edit distance (one edit per three characters, at
least one; ``sl`` -> ``s1``), or difflib finds it similar (``cnt`` ->
``count``).  The closest wins; ties go to the earlier candidate.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap neighbours)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def nearest(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``word`` (case-insensitive), or None if none is close."""
    return _nearest(word, tuple(dict.fromkeys(candidates)), cutoff)


@functools.lru_cache(maxsize=1024)
def _nearest(word: str, candidates: tuple[str, ...], cutoff: float) -> str | None:
    # (cached: a hostile file repeats one misspelling 50,000 times, issue 12)
    import difflib  # (only with a diagnostic to phrase: not imported at every start-up)

    low = word.lower()
    limit = 0 if len(low) < 2 else max(1, len(low) // 3)
    best: tuple[int, float, int] | None = None
    best_c: str | None = None
    for order, c in enumerate(candidates):
        cl = c.lower()
        if c == word:
            continue
        if cl == low:
            return c
        dist = edit_distance(low, cl)
        ratio = difflib.SequenceMatcher(None, low, cl).ratio()
        if dist > limit and ratio < cutoff:
            continue
        key = (dist, -ratio, order)
        if best is None or key < best:
            best, best_c = key, c
    return best_c


def hint(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean X?)`` for the nearest candidate, or the empty string."""
    best = nearest(word, candidates, cutoff)
    return f" (did you mean {best}?)" if best else ""
