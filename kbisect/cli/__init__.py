"""The command line: one module per command group (lab, try, testcases, service, jobs,
gc, trees). kbisect.main assembles them with the doors' commands and handles errors."""
