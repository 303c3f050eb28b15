"""Share groups (KIP-932): the share consumer role, the observer of ``__share_group_state``, a run's set-up and
readings (``runs``), the tap of ShareAcknowledge on the fault proxy (``ack_tap``), the share checks and timeline, and
the effect store of notebook 06's consumers."""
