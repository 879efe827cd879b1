"""No test reads or writes the user's own cache, data or host lock."""

from pathlib import Path

import platformdirs
import pytest

from kbisect import settings
from kbisect.settings import Settings
from tests.conftest import E2E_CACHE, E2E_LOCKS


def test_a_test_has_its_own_cache_data_and_lock_folders(tmp_path: Path) -> None:
    s = Settings.from_env()
    assert s.cache != Path(platformdirs.user_cache_dir("kbisect"))
    assert s.data != Path(platformdirs.user_data_dir("kbisect"))
    assert s.locks != Path(settings.DEFAULT_LOCK_DIR)
    assert all(tmp_path in p.parents for p in (s.cache, s.data, s.locks))


@pytest.mark.e2e
def test_an_end_to_end_test_shares_only_the_test_cache_and_its_lock(tmp_path: Path) -> None:
    s = Settings.from_env()
    assert s.cache != Path(platformdirs.user_cache_dir("kbisect"))
    assert s.cache == E2E_CACHE and s.locks == E2E_LOCKS != Path(settings.DEFAULT_LOCK_DIR)
    assert tmp_path in s.data.parents
