"""Notebook 02's zombie experiment: an unknown fencing is refused (each fencing's run is notebook 02's)."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.fencing import FENCING, zombie


def test_unknown_fencing_names_the_choices(tmp_path):
    exp = Experiment("zombie", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="unknown fencing 'epoch'; choose one of none, transactional.id, group metadata"):
        zombie(exp, "epoch")
    assert FENCING == ("none", "transactional.id", "group metadata")


# Each fencing's timeline against the broker (every write on its own row, in the state read_committed agrees with) is
# notebook 02's claim on its own three zombie runs (labkit/crashlab/figure_truth.py), not three more runs here.
