"""The crash lab engine, naming no topic: participants (real client processes you can crash, pause and restart)
and the loop their roles share, the role registry (a role is one module, found by name), the fault proxy, the
supervisor, the exactly-once checker, experiments, timelines and the control panel. Topics plug in as roles
(``labkit/<package>/roles/``); tests/test_layout.py keeps share groups, Spark, lessons and models out."""
