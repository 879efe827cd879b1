"""--alerts-every: how often a door looks for its series watches' alerts, checked."""

import pytest

from kbisect.errors import UserError
from kbisect.jobs.series_client import ALERT_POLL_SECONDS, alert_poll
from kbisect.main import main


@pytest.mark.parametrize("text", ["0", "0.5", "3601", "nan", "inf", "-1", "soon", ""])
def test_a_look_too_often_too_rare_or_not_a_number_is_one_line(text: str) -> None:
    with pytest.raises(UserError, match=r"--alerts-every .*: give seconds from 1 to 3600$"):
        alert_poll(text)


def test_seconds_within_the_limits_are_taken() -> None:
    assert alert_poll("1") == 1.0 and alert_poll("90.5") == 90.5
    assert alert_poll(str(ALERT_POLL_SECONDS)) == ALERT_POLL_SECONDS


@pytest.mark.parametrize("door", [["chat", "matrix"], ["gitlab", "serve"]])
def test_both_doors_take_it_with_its_default_in_their_help(
    door: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([*door, "--help"])
    assert done.value.code == 0
    assert "--alerts-every SECONDS" in capsys.readouterr().out
