"""Resolve the JVM jars cep's optional parts need (Kafka broker, Spark's Kafka connector) from Maven Central.

Why: neither the Apache Kafka broker nor Spark's ``format("kafka")`` connector ships on PyPI. The pom in
``connectors/jars/`` lists them; ``mvn dependency:copy-dependencies`` copies them into a cache directory that is
reused between runs (keyed by a hash of the poms, so changing a version re-resolves). The cache is
``$CEP_JAR_CACHE`` or ``~/.cache/cep-maven``.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

POM_DIR = Path(__file__).resolve().parent / "jars"
POMS = ("pom.xml", "broker/pom.xml", "spark-kafka/pom.xml")


class JarResolutionError(RuntimeError):
    """Maven could not resolve the jars (no mvn, no network, or a bad version)."""


def cache_root() -> Path:
    return Path(os.environ.get("CEP_JAR_CACHE") or Path.home() / ".cache" / "cep-maven")


def _pom_hash() -> str:
    h = hashlib.sha256()
    for p in POMS:
        h.update((POM_DIR / p).read_bytes())
    return h.hexdigest()[:12]


def resolve(timeout: float = 600) -> Path:
    """Return the cache directory holding ``broker/`` and ``spark-kafka/`` jars, running Maven if needed."""
    out = cache_root() / _pom_hash()
    if (out / ".complete").exists():
        return out
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarResolutionError("Maven (mvn) is not installed: it is needed once to fetch the Kafka/Spark jars")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [mvn, "-q", "-B", "-f", str(POM_DIR / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise JarResolutionError(f"mvn did not finish within {timeout:.0f} s: {' '.join(cmd)}") from None
    if r.returncode != 0:
        raise JarResolutionError(f"mvn failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}{r.stderr[-2000:]}")
    (tmp / ".complete").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def broker_classpath(root: Path | None = None) -> str:
    root = root or resolve()
    return str(root / "broker" / "*")


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    name = os.path.basename(jar)[: -len(".jar")]
    parts = name.split("-")
    while len(parts) > 1 and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def spark_kafka_jars(root: Path | None = None) -> list[str]:
    """The connector jars for ``spark.jars``, minus artifacts pyspark already ships (no duplicate classes)."""
    import pyspark

    root = root or resolve()
    have = {_artifact(j) for j in glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "*.jar"))}
    jars = sorted(glob.glob(str(root / "spark-kafka" / "*.jar")))
    if not any(_artifact(j).startswith("spark-sql-kafka") for j in jars):
        raise JarResolutionError(f"no spark-sql-kafka jar in {root / 'spark-kafka'}")
    return [j for j in jars if _artifact(j) not in have]


def check_spark_version() -> None:
    """The connector must be built for the installed PySpark: say so clearly when it is not."""
    import pyspark

    text = (POM_DIR / "spark-kafka" / "pom.xml").read_text()
    want = text.split("<spark.version>", 1)[1].split("<", 1)[0]
    if pyspark.__version__ != want:
        raise JarResolutionError(
            f"connectors/jars/spark-kafka/pom.xml fetches the Kafka connector for Spark {want}, but PySpark "
            f"{pyspark.__version__} is installed: install pyspark=={want} (the spark extra pins it)")
