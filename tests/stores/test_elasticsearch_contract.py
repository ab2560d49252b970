"""The shared store contract against a real Elasticsearch 8.x server.

Runs only when `MEMORYSCOPE_ES_URL` is set (e.g. `http://localhost:9200`, the docker-compose
server). Optional: `MEMORYSCOPE_ES_API_KEY`, or `MEMORYSCOPE_ES_USERNAME` and
`MEMORYSCOPE_ES_PASSWORD`; `MEMORYSCOPE_ES_CA_CERTS` for https with a private CA. Each test gets
its own index `memoryscope_test_<run>_<n>`, deleted after the test with its history and leases
indices (the hooks are `memoryscope.testing.es_contract.ElasticsearchContract`, which
`python -m memoryscope.testing.es_contract --url URL` runs with a report)::

    MEMORYSCOPE_ES_URL=http://localhost:9200 pytest -m elasticsearch tests/stores/test_elasticsearch_contract.py
"""

from __future__ import annotations

import os
import uuid

import pytest

from memoryscope.testing.es_contract import URL_VARIABLE, ElasticsearchContract

pytestmark = [
    pytest.mark.elasticsearch,
    pytest.mark.skipif(not os.environ.get(URL_VARIABLE), reason=f"set {URL_VARIABLE} to run the contract against Elasticsearch"),
]


class TestElasticsearchStoreContract(ElasticsearchContract):
    index_prefix = f"memoryscope_test_{uuid.uuid4().hex[:8]}_"
