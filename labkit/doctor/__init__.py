"""``make doctor`` (``python -m labkit doctor``): whether this machine can run the lab, one line per prerequisite
with its fix, then which notebooks can run here (issue 39).

Modules, one job each: :mod:`~labkit.doctor.needs` (what each notebook needs), :mod:`~labkit.doctor.checks` (one
function per prerequisite), :mod:`~labkit.doctor.network` (Maven Central and the package index, asked only for what
is not cached), :mod:`~labkit.doctor.report` (the lines and the verdict), :mod:`~labkit.doctor.cli` (the command).
"""
