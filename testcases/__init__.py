"""The reusable testcase library (one folder per testcase) and the code that runs and scores them."""
