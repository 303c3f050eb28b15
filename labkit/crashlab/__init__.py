"""The crash lab engine, with no lesson code: participants (real client processes you can crash,
pause and restart), the fault proxy, one history per experiment, the checkers (exactly-once, and
share groups), timelines, the control panel, and the share-group observer and wire decoder."""
