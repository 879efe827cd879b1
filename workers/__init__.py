"""Worker processes and the thin activity wrappers they run."""
