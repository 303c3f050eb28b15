"""Share groups (KIP-932): the share consumer role, the observer of ``__share_group_state``, the share checks and
timeline, and the effect store of notebook 06's consumers."""
