"""Why a culprit changed the metric: the culprit and its parent booted in turn, their
system statistics and profiles read about the testcase, and what moved beyond its noise
listed (`kbisect explain`). The comparison is pure; the boots and the reading of what
the guest left are the testcases' (explain_run, proc_stats, cpu_profile)."""
