"""What a job's result reads as: the report, the plot, result lines, the SRU note, patch
and branch."""
