"""`python -m kbisect ...`, as `kbisect ...` (the local service is started so)."""

import sys

from kbisect.main import main

sys.exit(main())
