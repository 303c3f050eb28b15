"""Notebook 02's zombie experiment refuses an unknown fencing (the notebook runs each fencing whole)."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.fencing import FENCING, zombie


def test_unknown_fencing_names_the_choices(tmp_path):
    exp = Experiment("zombie", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="unknown fencing 'epoch'; choose one of none, transactional.id, group metadata"):
        zombie(exp, "epoch")
    assert FENCING == ("none", "transactional.id", "group metadata")
