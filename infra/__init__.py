"""VM backends, guest image builder, Temporal server management and the reproduction lab."""

# One module object per file: this folder is the package kbisect.infra (kbisect/infra links
# here); imported bare, as "infra", every module in it would load a second time.
if __name__ != "kbisect.infra":
    raise ImportError(f"import kbisect.infra, not {__name__}")
