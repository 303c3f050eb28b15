"""Notebook 01's experiments refuse settings that could not show the lesson (the notebook runs them whole)."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.idempotence import lost_responses, restart_and_resend


def test_too_few_records_for_the_losses_is_refused_before_anything_runs(tmp_path):
    exp = Experiment("idem", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="records=5 is too few for losses=3: use at least 9"):
        lost_responses(exp, proxy=None, idempotent=True, records=5, losses=3)


def test_crash_iteration_outside_the_batches_is_refused(tmp_path):
    exp = Experiment("idem", "127.0.0.1:1", folder=tmp_path)
    with pytest.raises(ValueError, match="crash_iteration must be within 1..5, not 6"):
        restart_and_resend(exp, batches=5, crash_iteration=6)
    assert exp.history.events() == []
