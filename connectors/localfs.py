"""cep's Hadoop local file system class for the JVMs ``make_session`` starts: ``classes_dir()``.

Why: PySpark ships no Hadoop native library, so Hadoop's local file system sets the permission bits of every file
and directory it creates by forking a ``chmod`` process. A cep micro-batch creates 16 files (checkpoint logs,
state changelogs, output parts and their checksum files): 16 processes forked and reaped by the JVM, ~0.05 CPU s
per micro-batch, ~2.5 % of a 10^5-event micro-batch on local[1] (bench/results/spark.md).
``jvm/cep/hadoop/LocalFileSystem.java`` is Hadoop's class with ``setPermission`` through java.nio (the same bits).

It is compiled on first use with Janino, the Java compiler every Spark ships in its ``jars/`` (Spark generates its
code with it), run by the ``java`` that runs Spark: no JDK needed. The classes go to cep's private cache
(``cep.cachedir``), under a key of the source, Hadoop's and Janino's jars; without a private cache, ``java``,
Janino or Hadoop's client jar there is no class, and the session keeps Hadoop's own.

The same directory holds an empty ``yarn-default.xml`` (``RESOURCES``), found on the class path before Hadoop's.
Why: Hadoop's ``JobConf`` (loaded by every Spark that writes files) adds YARN's defaults to every ``Configuration``
made after it: 527 of the session's 1,136 Hadoop properties, none of which a local or local-cluster master reads.
Spark serializes the Hadoop configuration every micro-batch (the file source's and the state store's broadcasts,
the file sink's job description in each task: each property with its source, GZIP-compressed one by one) and
copies it for every reader and writer; without YARN's defaults the JVMs took ~0.04 CPU s less per 10^5-event
micro-batch on local-cluster (median of 8 pairs, 7 lower: bench/results/spark.md, 2026-12-07d).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("jvm") / "cep" / "hadoop" / "LocalFileSystem.java"
CLASS_NAME = "cep.hadoop.LocalFileSystem"
# the compiled classes: the class and its nested raw file system
CLASS_FILES = ("cep/hadoop/LocalFileSystem.class", "cep/hadoop/LocalFileSystem$RawLocalFileSystem.class")
# what the directory holds beside the classes: Hadoop's YARN defaults as an empty configuration (module docstring)
RESOURCES = {"yarn-default.xml": (b'<?xml version="1.0"?>\n<!-- cep: no YARN defaults on a local or local-cluster master '
                                  b'(cep/connectors/localfs.py) -->\n<configuration>\n</configuration>\n')}
DIR_FILES = (*CLASS_FILES, *RESOURCES)  # a complete directory holds them all
# Janino's javac-like command line (in commons-compiler, beside Janino in every Spark's jars/)
JANINO_MAIN = "org.codehaus.commons.compiler.samples.CompilerDemo"


def _jars(jars_dir: Path) -> dict[str, Path] | None:
    """The jars the compiler needs from Spark's ``jars/``: Janino, commons-compiler, Hadoop's client API and
    SLF4J's API (Hadoop's classes refer to its logger); None if one is missing."""
    found = {}
    for name in ("janino", "commons-compiler", "hadoop-client-api", "slf4j-api"):
        hits = sorted(jars_dir.glob(f"{name}-[0-9]*.jar"))
        if not hits:
            return None
        found[name] = hits[-1]
    return found


def spark_jars_dir() -> Path:
    """The ``jars/`` of the Spark whose JVMs PySpark starts on this machine: ``$SPARK_HOME``'s if set (PySpark's
    launcher runs that Spark), else PySpark's own."""
    import pyspark

    home = os.environ.get("SPARK_HOME")
    return Path(home, "jars") if home else Path(pyspark.__file__).parent / "jars"


def classes_dir(jars_dir: Path | None = None) -> str | None:
    """The directory holding the compiled ``cep.hadoop.LocalFileSystem`` and ``RESOURCES`` (for the JVMs' class
    path), compiling it on first use with the jars of ``jars_dir`` (default: PySpark's); None when it cannot be had
    (no private cache, ``java`` or jar; the compiler failed). ``java``: ``$JAVA_HOME/bin/java`` or the one on
    ``PATH``, as Spark's launcher picks it."""
    from cep.cachedir import private_dir

    jars = _jars(jars_dir or spark_jars_dir())
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")
                        if os.environ.get("JAVA_HOME") else None)
    cache = private_dir("hadoop-fs")
    if jars is None or java is None or cache is None:
        return None
    key = hashlib.sha256(SOURCE.read_bytes())
    for jar in jars.values():
        key.update(jar.name.encode())
    for name, text in RESOURCES.items():
        key.update(name.encode() + text)
    out = Path(cache, key.hexdigest()[:16])
    if all((out / f).is_file() for f in DIR_FILES):
        return str(out)
    return _compile(jars, java, out)


def _compile(jars: dict[str, Path], java: str, out: Path) -> str | None:
    """Compile ``SOURCE`` with Janino into ``out``, beside ``RESOURCES`` (through a temporary directory renamed into
    place, so a concurrent session never sees half of it); ``out`` as a string, or None if the compiler failed."""
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        r = subprocess.run([java, "-cp", os.pathsep.join(map(str, (jars["janino"], jars["commons-compiler"]))),
                            JANINO_MAIN, "-d", str(tmp),
                            "-classpath", os.pathsep.join(map(str, (jars["hadoop-client-api"], jars["slf4j-api"]))),
                            str(SOURCE)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not all((tmp / f).is_file() for f in CLASS_FILES):
            return None
        for name, text in RESOURCES.items():
            (tmp / name).write_bytes(text)
        try:
            os.replace(tmp, out)
        except OSError:  # another session put it there first
            if not all((out / f).is_file() for f in DIR_FILES):
                return None
        return str(out)
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
