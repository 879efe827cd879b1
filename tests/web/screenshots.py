"""Screenshots of the results pages for docs/img, in the tests' headless Chromium:

    .venv/bin/python -m tests.web.screenshots URL OUT.png [--width W] [--height H]

the page at URL once it loaded, as tall as it is (or H pixels: the top of a long page).
The browser holds the host lock as a build does: no guest of the service is timed while it
renders."""

import argparse
import sys
import time

from kbisect.infra import host_lock
from tests.web.browser import chromium, missing


def shoot(url: str, out: str, width: int, height: int | None) -> None:
    with host_lock.for_build():
        _shoot(url, out, width, height)


def _shoot(url: str, out: str, width: int, height: int | None) -> None:
    driver = chromium(width, height or 900)
    try:
        driver.get(url)
        time.sleep(1.0)  # the plot's image and the page's script
        if height is None:
            for _ in range(3):  # the window's frame is not the page's: grow by what is missing
                short = int(
                    driver.execute_script(
                        "return document.documentElement.scrollHeight - window.innerHeight"
                    )
                )
                if short <= 0:
                    break
                driver.set_window_size(width, driver.get_window_size()["height"] + short)
        driver.save_screenshot(out)
    finally:
        driver.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("url", help="a results page, e.g. http://127.0.0.1:8234/kbisect/")
    ap.add_argument("out", help="the PNG to write")
    ap.add_argument("--width", type=int, default=1280, help="the window's width (1280)")
    ap.add_argument("--height", type=int, help="the window's height (default: the page's)")
    args = ap.parse_args()
    if why := missing():
        print(why, file=sys.stderr)
        return 2
    shoot(args.url, args.out, args.width, args.height)
    return 0


if __name__ == "__main__":
    sys.exit(main())
