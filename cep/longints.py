"""Where a JSON text may hold an integer that orjson does not read exactly.

orjson reads an integer beyond 64 bits as a float, while cep keeps integers exact (stdlib ``json``
reads them so).  Such an integer has at least 19 digits, so a text without a run of 19 digits can
go to orjson.  The reader's batch test (``cep.io.readers``' ``decode.plain``) and the engine state
decoder (``cep.runtime.state``) ask this same question of their bytes: one home for it.  A base
utility: no import from the rest of cep.
"""

from __future__ import annotations

# the bytes as their digit runs: each digit ``0``, any other byte ``.``
DIGIT_VIEW = bytes(48 if 48 <= b <= 57 else 46 for b in range(256))
LONG_RUN = b"0" * 19  # in ``DIGIT_VIEW``: 19 digits in a row


def has_long_digit_run(blob: bytes) -> bool:
    """Whether ``blob`` holds 19 digits in a row (one C pass and one search)."""
    return LONG_RUN in blob.translate(DIGIT_VIEW)


NUMPY_CHUNK = 1 << 18  # bytes ``has_long_digit_run_numpy`` looks at in one go (its arrays: ~1 MB in all)


def has_long_digit_run_numpy(blob: bytes, chunk: int = NUMPY_CHUNK) -> bool:
    """``has_long_digit_run(blob)``, on a numpy view of the bytes: the digit mask and'ed with itself shifted
    (runs of 2, 4, 8, 16 digits from each place), then two runs ``len(LONG_RUN) - 16`` apart.  For callers
    with numpy loaded and big blobs (the Spark connector's route step tests a whole file's bytes): ~50
    instructions a record of card-testing lines against ~830 for the translate and search, whose constant
    cost and import stay out of ``cep run``'s reader (numpy is imported here, when called).

    The blob is looked at ``chunk`` bytes at a time (each window also holds the ``len(LONG_RUN) - 1`` bytes
    after it, so a run starting in it is wholly in it). Why: on a whole file at once the mask and its shifts
    are ~7 arrays of the file's size, freshly allocated and page-faulted (a 6.7 MB file: ~47 MB, ~4 ms); a
    window's stay in the cache and in the allocator's free lists (~1.7 ms)."""
    import numpy as np

    need = len(LONG_RUN)
    view = memoryview(blob)
    for lo in range(0, len(view), chunk):
        run = (np.frombuffer(view[lo:lo + chunk + need - 1], np.uint8) - 48) < 10  # (bytes below "0" wrap round)
        width = 1
        while 2 * width <= need:
            run = run[:-width] & run[width:]  # run[i]: 2 * width digits from i on
            width *= 2
        if width < need:
            run = run[:width - need] & run[need - width:]
        if run.any():
            return True
    return False
