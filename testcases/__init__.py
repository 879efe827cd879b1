"""The reusable testcase library (a folder per testcase) and the code that runs and scores it."""
