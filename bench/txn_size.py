"""Transactional produce throughput against non-transactional, for 1, 10, 100, 1 000 and 10 000
records per transaction, as a ratio measured in the same run (seed 002: the per-transaction
overhead is constant, so larger transactions amortise it).

Run: ``make bench`` (or ``.venv/bin/python bench/txn_size.py``).
"""

from labkit.broker import EmbeddedBroker
from labkit.lessons.isolation import txn_throughput

if __name__ == "__main__":
    with EmbeddedBroker() as broker:
        txn_throughput(broker.bootstrap_servers, (100,))  # warm-up
        table = txn_throughput(broker.bootstrap_servers)
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    print("ratio = transactional / non-transactional records per second, same run")
