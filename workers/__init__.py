"""Worker processes and the thin activity wrappers they run."""

# One module object per file: this folder is the package kbisect.workers (kbisect/workers links
# here); imported bare, as "workers", every module in it would load a second time.
if __name__ != "kbisect.workers":
    raise ImportError(f"import kbisect.workers, not {__name__}")
