"""`python -m kbisect.cli ...`, as `kbisect ...` (the local service is started so)."""

import sys

from kbisect.cli import main

sys.exit(main())
