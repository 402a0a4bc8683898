"""Child processes for the measured runs: cep in-process loop, `cep run` end to end, the Esper runner.

Why: each run is a fresh process, so its peak resident memory (``ru_maxrss`` from ``wait4``) is its own
and comparable across systems, and the wall time of `cep run` includes everything a user waits for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
ESPER_DIR = BENCH_DIR / "esper"
ESPER_CLASSPATH = f"{ESPER_DIR / 'target' / 'classes'}{os.pathsep}{ESPER_DIR / 'target' / 'dependency' / '*'}"


# `python -c` puts the working directory (the bench's checkout) first on sys.path, ahead of PYTHONPATH:
# it is dropped, so ``base_env``'s checkout is the one that runs (else --base measured this checkout twice)
CEP_MAIN = ("import sys; sys.path[:1] = [] if sys.path[0] == '' else sys.path[:1]; sys.argv[0] = 'cep'; "
            "from cep.cli import main; sys.exit(main())")


class RunFailed(RuntimeError):
    """A measured child process failed; the message carries its stderr tail."""


def run_measured(cmd: list[str], timeout: float, env: dict | None = None, cwd: str | Path | None = None) -> dict:
    """Run ``cmd``; return its wall time, its own peak RSS (MiB, from ``wait4``), exit status, output.

    ``sampled_hwm_mb`` is the sum over the process and its descendants (``cep run --workers``) of
    each one's own peak (VmHWM, sampled every 50 ms): an upper bound of what they held at once, as
    pages a fork shares are counted in every process that maps them.  ``cpu_s`` includes the
    descendants the process waited for."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=cwd or REPO, env=env)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        peaks: dict[int, float] = {}  # pid -> its VmHWM (MiB), the child and its descendants
        done = threading.Event()

        def sample() -> None:  # VmHWM of the child's own image (ru_maxrss includes ours, see run_cep)
            while not done.is_set():
                for pid in _tree(p.pid):
                    try:
                        with open(f"/proc/{pid}/status") as f:
                            for line in f:
                                if line.startswith("VmHWM:"):
                                    peaks[pid] = max(peaks.get(pid, 0.0), int(line.split()[1]) / 1024.0)
                                    break
                    except (OSError, ValueError):
                        pass
                done.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            done.set()
            timer.cancel()
            sampler.join()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if wall >= timeout:
        raise RunFailed(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
    return {"wall_s": wall, "rc": p.returncode, "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"), "maxrss_mb": ru.ru_maxrss / 1024.0,
            "sampled_hwm_mb": sum(peaks.values()), "cpu_s": ru.ru_utime + ru.ru_stime}


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc/PID/task/PID/children)."""
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        try:
            with open(f"/proc/{q}/task/{q}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return out


def json_tail(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return orjson.loads(line)
    raise RunFailed("no JSON result on stdout")


def run_cep_inprocess(patterns: list[Path], input_path: Path, output: str = "/dev/null",
                      time_unit: str = "s", timeout: float = 900, profile: str | None = None,
                      extra: list[str] | None = None, env: dict | None = None,
                      cwd: str | Path | None = None) -> dict:
    """The measured cep loop (bench.run_cep) in a fresh interpreter (``env``: e.g. another checkout's
    ``cep`` first on PYTHONPATH, see ``base_env``; then ``cwd`` must be that checkout too: ``-m`` puts
    the working directory ahead of PYTHONPATH)."""
    cmd = [sys.executable, "-m", "bench.run_cep", *map(str, patterns), "-i", str(input_path), "-o", output,
           "--time-unit", time_unit, *(extra or [])]
    if profile:
        cmd += ["--profile", profile]
    r = run_measured(cmd, timeout, env=env, cwd=cwd)
    if r["rc"] != 0:
        raise RunFailed(f"bench.run_cep exited {r['rc']}: {r['stderr'][-2000:]}")
    res = json_tail(r["stdout"])
    res["wall_s"] = r["wall_s"]
    res["loop_cpu_s"] = res["cpu_s"]  # the detection loop's own, as Esper's runner reports its cpu_s
    res["cpu_s"] = r["cpu_s"]  # the whole process (imports, compilation, the floor pass included)
    return res


def base_env(checkout: str | Path) -> dict:
    """The environment that runs another checkout's ``cep`` (a worktree of an older commit, for
    before/after ratios in one run): its folder first on PYTHONPATH.  The folders installed under
    ``cep.`` (grammar, patterns, connectors) must be reachable from its ``cep/`` (symlinks), or they
    come from this checkout's editable install."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(checkout).resolve()) + os.pathsep + env.get("PYTHONPATH", "")
    return env


_COMPILED: set[Path] = set()


def with_bytecode(env: dict | None) -> None:
    """Compile the ``cep`` package that ``env`` runs (``base_env``'s checkout, else this one) to bytecode
    once, as installing it does.

    Why: ``pip install`` writes each module's bytecode; a checkout run with PYTHONDONTWRITEBYTECODE=1 (set
    on some machines) never gets any, so every measured process would compile all of cep from source
    again (about 0.1 s per process, half of a 5,000-event run), a cost no installed cep has.
    """
    import compileall

    path = (env or {}).get("PYTHONPATH", "").split(os.pathsep)[0] if env is not None else ""
    checkout = Path(path).resolve() if path else REPO
    if checkout in _COMPILED:
        return
    for package in ("cep", "grammar", "patterns", "connectors"):
        if (checkout / package).is_dir():
            compileall.compile_dir(checkout / package, quiet=1)
    _COMPILED.add(checkout)


def run_cep_cli(patterns: list[Path], input_path: Path, output: str | None = None,
                time_unit: str = "s", timeout: float = 900, env: dict | None = None,
                extra: list[str] | None = None) -> dict:
    """`cep run` end to end as a user runs it (process start, imports, compile, read, detect, write),
    from bytecode as an installed cep runs (``with_bytecode``).

    Output goes to a temporary file (not /dev/null) so its lines can be counted afterwards.
    """
    import tempfile

    with_bytecode(env)

    tmp = None
    if output is None:
        fd, tmp = tempfile.mkstemp(prefix="cep-bench-", suffix=".jsonl")
        os.close(fd)
        output = tmp
    cmd = [sys.executable, "-c", CEP_MAIN, "run", *map(str, patterns), "-i", str(input_path), "-o", output,
           "--time-unit", time_unit, *(extra or [])]
    try:
        r = run_measured(cmd, timeout, env=env)
        if r["rc"] != 0:
            raise RunFailed(f"cep run exited {r['rc']}: {r['stderr'][-2000:]}")
        composites = None
        if tmp is not None:
            with open(tmp, "rb") as f:
                composites = sum(1 for line in f if line.strip())
    finally:
        if tmp is not None:
            os.unlink(tmp)
    return {"composites": composites, "system": " ".join(["cep run", *(extra or [])]), "wall_s": r["wall_s"], "run_s": r["wall_s"], "peak_rss_mb": r["sampled_hwm_mb"],
            "cpu_s": r["cpu_s"],
            "stderr": r["stderr"][-500:]}


def esper_built() -> bool:
    return (ESPER_DIR / "target" / "classes" / "cepbench" / "EsperRunner.class").exists() and (
        ESPER_DIR / "target" / "dependency").is_dir()


def build_esper(timeout: float = 900) -> None:
    """``mvn -q package`` in bench/esper (downloads Esper from Maven Central on the first build)."""
    sources = list((ESPER_DIR / "src").rglob("*.java")) + [ESPER_DIR / "pom.xml"]
    cls = ESPER_DIR / "target" / "classes" / "cepbench" / "EsperRunner.class"
    if esper_built() and all(s.stat().st_mtime <= cls.stat().st_mtime for s in sources):
        return
    p = subprocess.run(["mvn", "-q", "package"], cwd=ESPER_DIR, capture_output=True, timeout=timeout)
    if p.returncode != 0 or not esper_built():
        raise RunFailed(f"mvn -q package failed in {ESPER_DIR}: {p.stdout.decode()[-2000:]}")


def run_esper(epl: Path, input_path: Path, output: str = "/dev/null", time_scale: float = 1000,
              timeout: float = 900, heap: str = "4g", end_advance_ms: int = 0,
              type_map: dict[str, str] | None = None) -> dict:
    """The Esper runner on the same file; ``time_scale`` converts the time field to milliseconds.

    ``end_advance_ms`` > 0 moves Esper's clock that far past the last record at the end (timed), firing
    the timers still pending: the counterpart of cep deciding every pending match at the end of input.
    ``type_map`` renames record types to the EPL's event types (a type named like an EPL keyword, Order).
    """
    cmd = ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-cp", ESPER_CLASSPATH, "cepbench.EsperRunner",
           "--epl", str(epl), "--input", str(input_path), "--output", output, "--time-scale", str(time_scale)]
    if end_advance_ms > 0:
        cmd += ["--end-advance-ms", str(end_advance_ms)]
    if type_map:
        cmd += ["--type-map", ",".join(f"{k}={v}" for k, v in type_map.items())]
    r = run_measured(cmd, timeout)
    if r["rc"] != 0:
        raise RunFailed(f"EsperRunner exited {r['rc']}: {r['stderr'][-2000:]}")
    res = json_tail(r["stdout"])
    res["wall_s"] = r["wall_s"]
    res["peak_rss_mb"] = res.get("vmhwm_mb") if (res.get("vmhwm_mb") or -1) > 0 else r["maxrss_mb"]
    return res
