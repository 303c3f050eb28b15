"""Share-group roles (KIP-932)."""
