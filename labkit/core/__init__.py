"""The runtime plumbing every layer stands on (imports nothing of labkit above it).

* :mod:`labkit.core.errors`: the exceptions labkit raises, each naming its fix.
* :mod:`labkit.core.waiting`: waiting for a condition by polling, with a deadline.
* :mod:`labkit.core.background`: periodic work in a background thread.
* :mod:`labkit.core.procs`: child processes that never outlive their parent; which process a pid names.
* :mod:`labkit.core.jsonfile`: a JSON file written whole or not at all.
* :mod:`labkit.core.history`: one experiment's history, a JSON-lines file of events every participant appends to.
"""
