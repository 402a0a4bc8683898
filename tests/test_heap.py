"""``cep run`` keeps glibc from returning heap pages between waves of allocations (cep.commands.heap).

Measured in a subprocess: allocate and free 200 blocks of 1 MiB through the C allocator three times and
count the minor page faults of the last round.  With glibc's defaults freed memory goes back to the
kernel and is faulted in again (tens of thousands of faults); after ``tune_heap()`` it stays (almost
none).  Elsewhere than glibc ``tune_heap()`` must say it did nothing.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

from cephelp import ROOT

from cep.commands.heap import tune_heap

PROBE = r"""
import ctypes, resource, sys
from cep.commands.heap import tune_heap
tuned = tune_heap() if sys.argv[1] == "tune" else False
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
MIB = 1 << 20
def wave():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(MIB) for _ in range(200)]
    for b in blocks:
        ctypes.memset(b, 1, MIB)  # touch every page
    for b in reversed(blocks):
        libc.free(b)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
wave(); wave()
print(tuned, wave())
"""

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _probe(mode: str, **env: str) -> tuple[bool, int]:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    e.pop("MALLOC_TRIM_THRESHOLD_", None)
    r = subprocess.run([sys.executable, "-c", PROBE, mode], env=e, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    tuned, faults = r.stdout.split()
    return tuned == b"True", int(faults)


def test_tuning_keeps_freed_heap_pages_on_glibc():
    if not GLIBC:
        assert tune_heap() is False
        return
    tuned, faults_tuned = _probe("tune")
    untuned, faults_default = _probe("default")
    assert tuned and not untuned
    pages = 200 * (1 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert faults_default > pages // 2, faults_default  # glibc gave the pages back and took them again
    assert faults_tuned < pages // 20, faults_tuned  # kept: a third wave reuses them


def test_tuning_can_be_switched_off():
    tuned, _ = _probe("tune", CEP_HEAP_TUNING="0")
    assert tuned is False


def test_cep_run_tunes_its_process(monkeypatch, tmp_path):
    """The run command calls tune_heap before it reads anything."""
    from cep.commands import run as run_mod

    calls = []
    monkeypatch.setattr(run_mod, "tune_heap", lambda: calls.append(1) or True)
    pat = tmp_path / "p.pattern"
    pat.write_text("PATTERN p SEQ(A a, B b)\n")
    inp = tmp_path / "in.jsonl"
    inp.write_text("")
    import io

    assert run_mod.run(run_mod.RunOptions(patterns=[str(pat)], input=str(inp), output=str(tmp_path / "o"),
                                          quiet=True), io.StringIO()) == 0
    assert calls == [1]
