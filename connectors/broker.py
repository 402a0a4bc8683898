"""A local single-node Apache Kafka broker (KRaft) from the Maven jars, for tests, benchmarks and trying cep out.

Why here and not only in the tests: the benchmark and the docs' walkthrough need the same broker. It binds to
127.0.0.1 on free ports, keeps its data in a directory of its own, waits for readiness with a time bound and is
stopped by its process id (never by name).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

from cep.connectors import jars

from cep.exit_codes import EXIT_OK

LOG4J2 = """status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
"""


class BrokerError(RuntimeError):
    """The broker could not be formatted or did not become ready in time."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaBroker:
    """One KRaft broker+controller process on loopback; ``start()`` / ``stop()``; usable as a context manager."""

    def __init__(self, workdir: str | os.PathLike, *, partitions: int = 3, heap: str = "512m") -> None:
        self.dir = Path(workdir)
        self.partitions = partitions
        self.heap = heap
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        data = self.dir / "data"
        props = f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{self.controller_port}
listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.partitions={self.partitions}
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.flush.interval.messages=1000000
"""
        cfg = self.dir / "server.properties"
        cfg.write_text(props)
        (self.dir / "log4j2.properties").write_text(LOG4J2)
        return cfg

    def _java(self, *args: str) -> list[str]:
        return ["java", f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                "-cp", jars.broker_classpath(), *args]

    def start(self, timeout: float = 90) -> KafkaBroker:
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg = self._write_config()
        cluster = uuid.uuid4().hex[:22]
        r = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(cfg)),
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise BrokerError(f"kafka storage format failed: {r.stdout}{r.stderr}")
        log = open(self.dir / "broker.log", "wb")
        self.proc = subprocess.Popen(self._java("kafka.Kafka", str(cfg)), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        (self.dir / "broker.pid").write_text(str(self.proc.pid))
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaConfigurationError

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerError(f"kafka broker exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000,
                                         bootstrap_timeout_ms=3000)
                try:
                    admin.list_topics()
                    # KRaft answers metadata before the broker is unfenced; a topic create proves it is usable
                    self.create_topic(f"_cep_ready_{uuid.uuid4().hex[:6]}", partitions=1, admin=admin)
                    return
                finally:
                    admin.close()
            except KafkaConfigurationError:
                raise
            except Exception as e:  # noqa: BLE001 - not up yet; retried until the deadline
                last = e
                time.sleep(0.5)
        raise BrokerError(f"kafka broker not ready after {timeout:.0f} s ({last!r}): {self.log_tail()}")

    def create_topic(self, name: str, partitions: int | None = None, admin=None) -> str:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        own = admin is None
        if own:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000)
        try:
            admin.create_topics([NewTopic(name=name, num_partitions=partitions or self.partitions,
                                          replication_factor=1)])
        finally:
            if own:
                admin.close()
        return name

    def log_tail(self, n: int = 3000) -> str:
        try:
            return (self.dir / "broker.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m cep.connectors.broker [DIR] [--topic NAME ...]``: run a local broker until Ctrl-C."""
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(prog="python -m cep.connectors.broker", description=main.__doc__)
    ap.add_argument("dir", nargs="?", help="data directory (default: a new temporary one)")
    ap.add_argument("--topic", action="append", default=[], help="create this topic (repeatable)")
    ap.add_argument("--partitions", type=int, default=3)
    a = ap.parse_args(argv)
    d = a.dir or tempfile.mkdtemp(prefix="cep-kafka-")
    with KafkaBroker(d, partitions=a.partitions) as b:
        for t in a.topic:
            b.create_topic(t)
        print(f"kafka broker at {b.bootstrap} (pid {b.proc.pid if b.proc else '?'}, data {d}); Ctrl-C stops it",
              flush=True)
        try:
            while b.proc is not None and b.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
