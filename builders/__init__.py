"""Kernel builds: worktrees, config, make, ccache and the artifact cache."""

# One module object per file: this folder is the package kbisect.builders (kbisect/builders links
# here); imported bare, as "builders", every module in it would load a second time.
if __name__ != "kbisect.builders":
    raise ImportError(f"import kbisect.builders, not {__name__}")
