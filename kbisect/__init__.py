"""kbisect: kernel bisection automation (shared vocabulary, CLI and front doors)."""
