"""The listener loads the ``kio`` types of a client's first requests before it serves:
each API's highest version, the lower ones librdkafka and kcat (librdkafka 2.0) send, and
every ApiVersions version, so none of them is loaded on a request
(``benchmarks/kafka_first_request.py`` measures the difference)."""

from __future__ import annotations

from compactlog.server.kafka import protocol, sasl
from compactlog.server.kafka.api_versions import API_VERSIONS, SUPPORTED
from compactlog.server.kafka.listener import first_versions, preload_schemas

# What kcat 1.7 (Debian's, librdkafka 2.0.2) sends for a read and a write (debug=protocol):
# ApiVersions v3, Metadata v4, ListOffsets v2, Fetch v11, Produce v7.
KCAT = [(18, 3), (3, 4), (2, 2), (1, 11), (0, 7)]


def test_first_requests_find_their_types_loaded() -> None:
    low, high = SUPPORTED[API_VERSIONS]
    served = {**SUPPORTED, **sasl.VERSIONS}
    loaded = first_versions()
    assert preload_schemas().result(timeout=120) == sum(len(v) for v in loaded.values())
    assert {key: max(versions) for key, versions in loaded.items()} == {
        key: top for key, (_low, top) in served.items()
    }
    assert loaded[API_VERSIONS] == set(range(low, high + 1))
    assert {5, 6, 7} <= loaded[11]  # librdkafka's JoinGroup v5 and those above it
    assert preload_schemas() is preload_schemas()  # started once a process
    misses = (protocol.request_type.cache_info().misses, protocol.load_response.cache_info().misses)
    firsts = [(key, top) for key, (_low, top) in served.items()]
    firsts += [(key, v) for key, versions in loaded.items() for v in versions] + KCAT
    for key, version in firsts:
        protocol.request_type(key, version)
        protocol.load_response(key, version)
        protocol.response_module(key, version)
    after = (protocol.request_type.cache_info().misses, protocol.load_response.cache_info().misses)
    assert after == misses
