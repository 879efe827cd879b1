"""VM backends, guest image builder, Temporal server management and the reproduction lab."""
