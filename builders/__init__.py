"""Kernel builds: worktrees, config, make, ccache and the artifact cache."""
