"""Property-based requests from the OpenAPI document: no 5xx, every response as documented.

Schemathesis generates requests for every operation (valid and invalid bodies, paths,
queries and headers) as tenant `acme`, against the real server on loopback. Each response
must be no server error and must match the status codes and schemas the document declares.
`CRUX_FUZZ_EXAMPLES` raises the count per operation (`make fuzz`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from temporalio.testing import WorkflowEnvironment

from tests.http.api import Credentials
from tests.http.threaded import threaded_api

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("CRUX_FUZZ_EXAMPLES", "20"))
"""Examples per operation: about 360 requests over the 18 operations in CI."""

CREDENTIALS = Credentials()
# Iterating the enum leaves out the deprecated checks (suppressing those warns).
ALL_CHECKS: list[HealthCheck] = list(HealthCheck)  # pyright: ignore[reportAssignmentType]


@pytest.fixture(scope="module")
def api_url(
    postgres_url: str, template_database: str, temporal_env: WorkflowEnvironment
) -> Iterator[str]:
    address = temporal_env.client.service_client.config.target_host
    with threaded_api(postgres_url, template_database, address, CREDENTIALS) as url:
        yield url


def test_every_operation_answers_as_documented(api_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # pyright: ignore[reportAttributeAccessIssue]
    assert len(operations) >= 18
    failures: dict[str, str] = {}
    statuses: dict[int, int] = {}
    succeeded: set[str] = set()
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=ALL_CHECKS)
        def check(case: schemathesis.Case) -> None:
            # Always acme's valid key: the authorization matrix covers the other credentials.
            headers = {
                name: value
                for name, value in (case.headers or {}).items()
                if name.lower() not in ("authorization", "x-api-key")
            }
            case.headers = {**headers, **CREDENTIALS.headers("acme")}  # pyright: ignore[reportAttributeAccessIssue]
            response = case.call_and_validate(
                base_url=api_url,
                checks=[not_a_server_error, response_schema_conformance, status_code_conformance],
                timeout=60,
            )
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code < 300:
                succeeded.add(case.operation.label)

        try:
            check()
        except Exception as failure:  # every operation runs; failures are listed together
            failures[operation.label] = str(failure)[:3000]
    print(
        f"openapi properties: {len(operations)} operations, {sum(statuses.values())} requests, "
        f"statuses {dict(sorted(statuses.items()))}, {len(succeeded)} operations answered 2xx"
    )
    assert failures == {}, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    # Not vacuous: generated requests got through validation to the operations.
    assert {200, 404, 422} <= set(statuses) and 401 not in statuses, statuses
    assert len(succeeded) >= 6, sorted(succeeded)
