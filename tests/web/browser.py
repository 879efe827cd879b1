"""Debian's Chromium, headless, driven by its chromedriver through Selenium: nothing is
downloaded (Selenium Manager is kept offline)."""

import os
from pathlib import Path

from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def missing() -> str:
    """What to do when the browser is not here ("" when it is)."""
    if CHROMIUM.exists() and DRIVER.exists():
        return ""
    return "Chromium or chromedriver is missing: run infra/install.sh --tests"


def chromium(width: int = 1280, height: int = 900) -> WebDriver:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager never fetches a browser or driver
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    return webdriver.Chrome(service=Service(str(DRIVER)), options=options)
