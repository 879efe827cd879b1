"""The doors other than the CLI: chat (Matrix) and GitLab, over one command grammar."""
