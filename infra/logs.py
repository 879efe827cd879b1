"""The log format of kbisect's long-running processes (workers, the chat and GitLab
doors): one timestamped line an event on stderr, INFO and up, so an operator sees each
build, boot and kernel fetched from the store, and when."""

import logging


def service_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
