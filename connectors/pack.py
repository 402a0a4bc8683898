"""Pack cep and its Python dependencies into one archive that Spark ships to executors.

Why: on a cluster the Python workers run on other machines (or, with ``local-cluster``, in other processes)
whose Python does not have cep. Spark ships an archive with ``--archives ARCHIVE#NAME`` (``spark.archives``) and
unpacks it in every executor's working directory; ``spark.executorEnv.PYTHONPATH=NAME`` puts it on the Python
workers' path. The archive holds cep (from a wheel, or from a normal installation) and the installed
distributions it requires (lark, sortedcontainers, orjson, click, tqdm and theirs), compiled parts included,
so the executors need the same platform and Python minor version as this interpreter, plus PySpark's own
requirements (pandas, pyarrow), as every PySpark job does. Nothing is downloaded: it packs what is installed.

    pip wheel --no-deps -w dist .                      # in a checkout (an editable install has no files to pack)
    python -m cep.connectors.pack cep-env.zip --wheel dist/cep-0.1.0-py3-none-any.whl
    spark-submit --archives cep-env.zip#cep-env --conf spark.executorEnv.PYTHONPATH=cep-env ...
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from cep.exit_codes import EXIT_OK, EXIT_OTHER

SKIP_PARTS = {"__pycache__"}


class PackError(RuntimeError):
    """Something the archive cannot be built from, with a message for the user."""


def _wanted(requirement: str) -> str | None:
    """The distribution name of a requirement that applies here without extras, else None."""
    from packaging.requirements import Requirement

    req = Requirement(requirement)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        return None
    return req.name


def dependency_closure(dist_name: str) -> list[str]:
    """``dist_name``'s installed runtime requirements, recursively (extras left out), sorted."""
    seen: set[str] = set()
    todo = [r for r in (metadata.distribution(dist_name).requires or [])]
    while todo:
        name = _wanted(todo.pop())
        if name is None:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise PackError(f"{name} (required by {dist_name}) is not installed here") from None
        seen.add(key)
        todo.extend(dist.requires or [])
    return sorted(seen)


def _dist_files(name: str) -> list[tuple[Path, str]]:
    """(file on disk, path in the archive) of one installed distribution."""
    dist = metadata.distribution(name)
    out = []
    for f in dist.files or []:
        if f.parts[0] in ("..", "/") or SKIP_PARTS & set(f.parts) or f.suffix == ".pth":
            continue  # scripts outside site-packages, byte code, path hooks
        src = Path(dist.locate_file(f))
        if src.is_file():
            out.append((src, f.as_posix()))
    return out


def _cep_files(wheel: str | None) -> list[tuple[Path | zipfile.ZipFile, str]]:
    if wheel is not None:
        z = zipfile.ZipFile(wheel)
        return [(z, n) for n in z.namelist() if not n.endswith("/")]
    import cep

    # an installed wheel has a RECORD listing every file, cep/__init__.py being the one imported; an editable
    # install (or a checkout's egg-info found first on the path) does not
    files = _dist_files("cep") if metadata.distribution("cep").read_text("RECORD") else []
    init = [src for src, arc in files if arc == "cep/__init__.py"]
    if not init or init[0].resolve() != Path(cep.__file__).resolve():
        raise PackError("cep is installed in editable (development) mode, so there are no installed files to "
                        "pack: build a wheel (pip wheel --no-deps -w dist .) and pass --wheel dist/cep-*.whl")
    return files  # type: ignore[return-value]


def pack(out: str | Path, wheel: str | None = None) -> list[str]:
    """Write the archive (a zip); return the distributions packed besides cep."""
    deps = dependency_closure("cep")
    entries = _cep_files(wheel)
    for d in deps:
        entries.extend(_dist_files(d))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        written: set[str] = set()
        for src, arc in entries:
            if arc in written:
                continue
            written.add(arc)
            if isinstance(src, zipfile.ZipFile):
                z.writestr(arc, src.read(arc))
            else:
                z.write(src, arc)
    return deps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cep.connectors.pack", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the archive to write (.zip)")
    ap.add_argument("--wheel", help="take cep from this wheel (needed when cep is installed in editable mode)")
    args = ap.parse_args(argv)
    try:
        deps = pack(args.out, args.wheel)
    except (PackError, OSError) as e:
        print(f"cep pack: error: {e}", file=sys.stderr)
        return EXIT_OTHER
    name = Path(args.out).name.split(".")[0]
    print(f"{args.out}: cep + {', '.join(deps)} (Python {sys.version_info[0]}.{sys.version_info[1]}, "
          f"{sys.platform})\nuse: spark-submit --archives {args.out}#{name} "
          f"--conf spark.executorEnv.PYTHONPATH={name} ...", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
