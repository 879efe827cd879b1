"""Temporal workflows and the pure bisection strategy and verdict logic they drive."""

# One module object per file: this folder is the package kbisect.workflows (kbisect/workflows links
# here); imported bare, as "workflows", every module in it would load a second time.
if __name__ != "kbisect.workflows":
    raise ImportError(f"import kbisect.workflows, not {__name__}")
