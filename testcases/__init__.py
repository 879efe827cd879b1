"""The reusable testcase library (a folder per testcase) and the code that runs and scores it."""

# One module object per file: this folder is the package kbisect.testcases (kbisect/testcases links
# here); imported bare, as "testcases", every module in it would load a second time.
if __name__ != "kbisect.testcases":
    raise ImportError(f"import kbisect.testcases, not {__name__}")
