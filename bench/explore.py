"""The KIP-1289 explorer (MODELLED): states explored and states per second, for notebook 07's small
configuration (2 consumers, 3 records, delivery limit 2, every fault kind possible, one fault per run,
no voluntary aborts) under each answer to open question (a), and for larger configurations.

Goal: the small configuration whole in under 10 s here. Printed as a ratio against the same run's
cost of exploring the fault-free configuration (time per state, so machine speed cancels out), and
against the 10 s goal.

Run: ``make bench`` (or ``.venv/bin/python bench/explore.py``).
"""

from labkit.models.explore import explore

SMALL = dict(records=3, consumers=2, limit=2, max_faults=1, aborts=0)


def main() -> None:
    base = explore(**{**SMALL, "max_faults": 0})
    per_state = base.seconds / base.states
    print(f"baseline, no faults: {base}")
    for option in ("freeze", "abort", "release"):
        r = explore(stop_at_first=False, lock_while_pending=option, **SMALL)
        print(f"lock_while_pending={option}: {r}")
        print(f"  time per state vs baseline {r.seconds / r.states / per_state:.2f}x; "
              f"{r.seconds / 10:.2f}x of the 10 s goal")
    for name, extra in (("one voluntary abort", {"aborts": 1}), ("two faults per run", {"max_faults": 2})):
        r = explore(max_states=500_000, **{**SMALL, **extra})
        print(f"{name}: {r}")


if __name__ == "__main__":
    main()
