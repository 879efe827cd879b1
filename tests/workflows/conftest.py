"""A local Temporal dev server for each workflow test module."""

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from kbisect.infra.temporal_server import temporal_binary
from kbisect.workflows.bisect_workflow import SEARCH_ATTRIBUTES


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        search_attributes=list(SEARCH_ATTRIBUTES),
    ) as env:
        yield env
