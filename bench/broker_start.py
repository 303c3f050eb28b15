"""Warm start-to-ready time of labkit's EmbeddedBroker next to a bare `java -cp ... kafka.Kafka` start
on the same jars, measured in the same run (this machine is noisy: compare the ratio, not seconds).

Both sides format fresh storage (a KRaft node cannot start without it) and count as ready when the
same probe passes: a metadata request is answered and a one-partition topic exists with a leader.
Goal: embedded ready in <= 20 s, and <= 1.3x the bare start.

Run: `make bench` (or `.venv/bin/python bench/broker_start.py [rounds]`).
"""

import base64
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from labkit.broker import EmbeddedBroker, probe, runtime
from labkit.broker.ports import free_port
from labkit.broker.settings import lab_settings, render_log4j2, render_server_properties
from labkit.core.waiting import wait_until


def embedded_start() -> float:
    started = time.monotonic()
    broker = EmbeddedBroker().start()
    elapsed = time.monotonic() - started
    broker.close()
    return elapsed


def bare_start(java: str, cp: str) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp:
        data, port = Path(tmp), free_port()
        props, log4j = data / "server.properties", data / "log4j2.properties"
        props.write_text(render_server_properties(data_dir=data, port=port, controller_port=free_port(),
                                                  settings=lab_settings()))
        log4j.write_text(render_log4j2(data / "server.log"))
        jvm = [java, "-Xmx768m", f"-Dlog4j2.configurationFile={log4j}", "-cp", cp]
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        started = time.monotonic()
        subprocess.run(jvm + ["kafka.tools.StorageTool", "format", "--standalone", f"--cluster-id={cluster_id}",
                              "-c", str(props)], check=True, capture_output=True)
        proc = subprocess.Popen(jvm + ["kafka.Kafka", str(props)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            if not wait_until(lambda: probe.is_ready(f"127.0.0.1:{port}"), 120):
                raise RuntimeError("bare broker not ready in 120 s")
            return time.monotonic() - started
        finally:
            proc.kill()
            proc.wait()


def main(rounds: int) -> None:
    java, cp = runtime.find_java(), runtime.classpath(runtime.ensure_jars())
    bare_start(java, cp)  # warm-up: page cache, JIT-free class loading from a warm disk
    embedded, bare = [], []
    for i in range(rounds):  # interleaved, so drift on the machine hits both sides alike
        embedded.append(embedded_start())
        bare.append(bare_start(java, cp))
        print(f"round {i + 1}: embedded {embedded[-1]:.2f} s, bare {bare[-1]:.2f} s", flush=True)
    e, b = statistics.median(embedded), statistics.median(bare)
    print(f"\nmedian start-to-ready: embedded {e:.2f} s, bare java kafka.Kafka {b:.2f} s")
    print(f"ratio embedded/bare: {e / b:.2f}x  (goal <= 1.30x)   embedded <= 20 s: {'yes' if e <= 20 else 'NO'}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
