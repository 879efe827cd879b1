"""kbisect's results pages: every job, sweep and series watch, read-only, in a browser."""
