"""The listener loads the ``kio`` types of a client's first requests before it serves:
each API's highest version and every ApiVersions version, so none of them is loaded on
a request (``benchmarks/kafka_first_request.py`` measures the difference)."""

from __future__ import annotations

from compactlog.server.kafka import protocol, sasl
from compactlog.server.kafka.api_versions import API_VERSIONS, SUPPORTED
from compactlog.server.kafka.listener import first_versions, preload_schemas


def test_first_requests_find_their_types_loaded() -> None:
    low, high = SUPPORTED[API_VERSIONS]
    served = {**SUPPORTED, **sasl.VERSIONS}
    ranges = first_versions()
    assert preload_schemas().result(timeout=120) == sum(b - a + 1 for a, b in ranges.values())
    assert {key: top for key, (_low, top) in ranges.items()} == {
        key: top for key, (_low, top) in served.items()
    }
    assert ranges[API_VERSIONS] == (low, high)
    assert ranges[11][0] <= 5  # librdkafka's JoinGroup v5
    assert preload_schemas() is preload_schemas()  # started once a process
    misses = (protocol.request_type.cache_info().misses, protocol.load_response.cache_info().misses)
    firsts = [(key, top) for key, (_low, top) in served.items()]
    firsts += [(key, v) for key, (a, b) in ranges.items() for v in range(a, b + 1)]
    for key, version in firsts:
        protocol.request_type(key, version)
        protocol.load_response(key, version)
        protocol.response_module(key, version)
    after = (protocol.request_type.cache_info().misses, protocol.load_response.cache_info().misses)
    assert after == misses
