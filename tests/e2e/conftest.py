"""A real lab from Debian's linux-source-6.1, shared by the end-to-end tests of a session."""

import json
import random
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.lab_plan import Span
from tests.e2e.service import lab_seed


@pytest.fixture(scope="session")
def real_lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    seed = lab_seed("e2e")
    dest = tmp_path_factory.mktemp("e2e") / "lab"
    rng = random.Random(seed)
    culprit_at = rng.randrange(4, 12)
    create_lab(
        dest,
        LabOptions(
            commits=16,
            culprit_at=culprit_at,
            seed=seed,
            broken_build=(Span(2),),
            broken_boot=(Span(14),),
        ),
    )
    truth = json.loads((dest.parent / "lab.truth.json").read_text())
    return dest, truth
