"""One module per notebook, named after it: the experiments and helpers that lesson runs."""
