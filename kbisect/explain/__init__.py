"""Why a culprit changed the metric: the culprit and its parent booted in turn, their
system statistics and profiles read about the testcase, and what moved beyond its noise
listed (`kbisect explain`). The parsing and the comparison are pure; the boots are the
workers'."""
