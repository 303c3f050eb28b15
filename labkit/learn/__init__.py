"""What a notebook asks of the learner and checks of itself.

* :mod:`labkit.learn.marks`: the marks a kernel publishes (checks, claims, predictions) and who hears them.
* :mod:`labkit.learn.claims`: a notebook's claims cells and their closing ``labkit.claims_hold(...)``.
* :mod:`labkit.learn.exercise`: exercise checks that compare an answer with what really happened.
* :mod:`labkit.learn.predictions`: predict before the first experiment, then the reveal beside the run.
* :mod:`labkit.learn.testmode`: whether a cell runs under the test runner or in a learner's hands.
* :mod:`labkit.learn.rerun`: one of each per kernel: a cell run again closes what its last run made.
"""
