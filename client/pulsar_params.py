"""pulsar-client parameters that have no meaning here (CONTRACT section 13): schema,
crypto, compression, chunking, listener threads and the like. (Batching has one: it
shapes ``send_async``'s PublishStream requests, ``send_batches``.)

Each is accepted at pulsar-client's default, so code written for pulsar-client runs
unchanged, and refused at once with one line for any other value, so nobody believes a
setting took effect that did not. A default that is one of pulsar-client's own objects
(``schema.BytesSchema()``, ``CompressionType.NONE``) is ``None`` here; pulsar-client's
object itself passes too, recognised by its name (this client does not import pulsar).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from compactlog.errors import InvalidArgument

__all__ = [
    "CLIENT_DEFAULTS",
    "PRODUCER_DEFAULTS",
    "READER_DEFAULTS",
    "SUBSCRIBE_DEFAULTS",
    "check_ignored",
    "client_settings",
    "pick",
]

# What pulsar-client's own default objects are called, by parameter.
_DEFAULT_NAMES = {
    "schema": "BytesSchema",
    "compression_type": "NONE",
    "message_routing_mode": "RoundRobinDistribution",
    "batching_type": "Default",
    "access_mode": "Shared",
    "regex_subscription_mode": "PersistentOnly",
    "crypto_failure_action": "FAIL",
}


def _is_default(name: str, value: object, default: object) -> bool:
    if value is None and default is None:
        return True
    if default is None and name in _DEFAULT_NAMES:
        found = getattr(value, "name", None) or type(value).__name__
        return found == _DEFAULT_NAMES[name]
    return type(value) is type(default) and value == default


def check_ignored(call: str, given: Mapping[str, object], defaults: Mapping[str, object]) -> None:
    """``InvalidArgument`` naming the first parameter in ``given`` that is not at its
    pulsar-client default (``defaults``)."""
    for name, value in given.items():
        if not _is_default(name, value, defaults[name]):
            raise InvalidArgument(
                f"{call}: {name}={value!r} is not supported by compactlog "
                f"(only pulsar-client's default, {defaults[name]!r}, is accepted)"
            )


# Client.create_producer's parameters without a meaning here, at pulsar-client's defaults.
PRODUCER_DEFAULTS: dict[str, object] = {
    "schema": None,
    "compression_type": None,
    "max_pending_messages": 1000,
    "max_pending_messages_across_partitions": 50000,
    "block_if_queue_full": False,
    "chunking_enabled": False,
    "message_routing_mode": None,
    "lazy_start_partitioned_producers": False,
    "properties": None,
    "batching_type": None,
    "encryption_key": None,
    "crypto_key_reader": None,
    "access_mode": None,
}

# Client.subscribe's, likewise.
SUBSCRIBE_DEFAULTS: dict[str, object] = {
    "schema": None,
    "message_listener": None,
    "max_total_receiver_queue_size_across_partitions": 50000,
    "broker_consumer_stats_cache_time_ms": 30000,
    "properties": None,
    "pattern_auto_discovery_period": 60,
    "crypto_key_reader": None,
    "replicate_subscription_state_enabled": False,
    "max_pending_chunked_message": 10,
    "auto_ack_oldest_chunked_message_on_queue_full": False,
    "start_message_id_inclusive": False,
    "key_shared_policy": None,
    "batch_index_ack_enabled": False,
    "regex_subscription_mode": None,
    "dead_letter_policy": None,
    "crypto_failure_action": None,
}

# Client.create_reader's, likewise.
READER_DEFAULTS: dict[str, object] = {
    "schema": None,
    "reader_listener": None,
    "subscription_role_prefix": None,
    "crypto_key_reader": None,
}


def pick(given: Mapping[str, object], defaults: Mapping[str, object]) -> dict[str, object]:
    """The parameters of ``given`` (a call's ``locals()``) that ``defaults`` names."""
    return {name: given[name] for name in defaults}


# pulsar-client's Client parameters without a meaning here, at its defaults.
CLIENT_DEFAULTS: dict[str, object] = {
    "authentication": None,
    "io_threads": 1,
    "message_listener_threads": 1,
    "concurrent_lookup_requests": 50000,
    "log_conf_file_path": None,
    "stats_interval_in_seconds": 600,
    "use_tls": False,
    "tls_allow_insecure_connection": False,
    "tls_validate_hostname": False,
    "logger": None,
    "connection_timeout_ms": 10000,
    "listener_name": None,
    "tls_private_key_file_path": None,
    "tls_certificate_file_path": None,
}


def client_settings(
    call: str, given: Mapping[str, object]
) -> tuple[str, float | None, str | os.PathLike[str] | None]:
    """``(address, timeout, tls_ca)`` from a client constructor's ``locals()``, pulsar-client's
    parameters first (the sync ``Client`` and the asyncio ``AsyncClient`` alike): the
    ``service_url`` without ``compactlog://``, ``operation_timeout_seconds`` when it is not
    its default 30 (else ``timeout``), ``tls_ca`` or ``tls_trust_certs_file_path``."""
    check_ignored(call, pick(given, CLIENT_DEFAULTS), CLIENT_DEFAULTS)
    operation_timeout = given["operation_timeout_seconds"]
    timeout = given["timeout"] if operation_timeout == 30 else operation_timeout
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
        raise InvalidArgument(f"timeout must be a number of seconds > 0, not {timeout!r}")
    tls_ca = given["tls_ca"] or given["tls_trust_certs_file_path"]
    service_url = str(given["service_url"])
    address = service_url.removeprefix("compactlog://").rstrip("/")
    return address, timeout, tls_ca  # type: ignore[return-value]
