"""Notebook 02's zombie experiment: an unknown fencing is refused (each fencing's run is notebook 02's); the epoch
figure."""

import pandas as pd
import pytest

from labkit.crashlab.experiment import Experiment
from labkit.lessons.fencing import FENCING, epoch_figure, zombie, zombies


def test_unknown_fencing_names_the_choices(tmp_path):
    exp = Experiment("zombie", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="unknown fencing 'epoch'; choose one of none, transactional.id, group metadata"):
        zombie(exp, "epoch")
    assert FENCING == ("none", "transactional.id", "group metadata")


# Each fencing's timeline against the broker (every write on its own row, in the state read_committed agrees with) is
# notebook 02's claim on its own three zombie runs (labkit/crashlab/figure_truth.py), not three more runs here.


def test_zombies_refuse_an_unknown_fencing():
    with pytest.raises(ValueError, match="unknown fencing 'epoch'"):
        zombies("127.0.0.1:1", "epoch")


def test_the_epoch_figure_draws_one_line_per_client():
    epochs = pd.DataFrame({"client": ["librdkafka"] * 2 + ["java"] * 2, "txn": [1, 2, 1, 2],
                           "producer_epoch": [0, 0, 1, 2]})
    fig = epoch_figure(epochs)
    assert {trace.name: list(trace.y) for trace in fig.data} == {"librdkafka": [0, 0], "java": [1, 2]}


# The epochs per transaction on each client (rising on Java, fixed on librdkafka) and the zombie on each client are
# notebook 02's claims on its own runs.
