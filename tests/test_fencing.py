"""Notebook 02's zombie experiment: an unknown fencing is refused; each fencing's timeline agrees with the broker."""

import pytest

from labkit.crashlab.experiment import Experiment
from labkit.crashlab.timeline import timeline_figure
from labkit.lessons.fencing import FENCING, zombie
from tests.figure_truth import contradictions, last_drawn_states


def test_unknown_fencing_names_the_choices(tmp_path):
    exp = Experiment("zombie", "127.0.0.1:1", folder=tmp_path)  # nothing is contacted
    with pytest.raises(ValueError, match="unknown fencing 'epoch'; choose one of none, transactional.id, group metadata"):
        zombie(exp, "epoch")
    assert FENCING == ("none", "transactional.id", "group metadata")


@pytest.mark.parametrize("fencing", FENCING)
def test_the_timeline_draws_what_read_committed_returns(bootstrap, tmp_path, fencing):
    # notebook 02's figures: every write of the output on its own row, each ending in the state the broker
    # agrees with (issue: the zombie's fenced B hid instance 2's committed B, drawn uncommitted)
    exp = Experiment(f"zombie-{fencing.replace(' ', '-')}", bootstrap, folder=tmp_path)
    run = zombie(exp, fencing)
    events = exp.history.events()
    fig = timeline_figure([e for e in events if e.kind != "final_read" and e.participant != "source"])
    assert contradictions(fig, events, run["output"]) == []
    states = last_drawn_states(fig)
    b_rows = sorted(state for row, state in states.items() if row.startswith("source-2>out"))
    assert b_rows == (["written", "written"] if fencing == "none" else ["aborted", "committed"]), states
    assert sum(row.endswith("— duplicate") for row in states) == (1 if fencing == "none" else 0), states
