"""A consumer rides out a server restart, as pulsar-client's does: ``receive`` waits for
the server within its timeout instead of failing, and what was given out but not
acknowledged comes again from the restarted server; a ``receive`` whose timeout ends
while the server is away raises ``Timeout``, not a connection error."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from compactlog.client import Client, InitialPosition, Timeout
from compactlog.client.aio import AsyncClient

from ..conftest import ServerProcess


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fixed_port_server(server_factory) -> ServerProcess:  # type: ignore[no-untyped-def]
    """A server on a port of its own that a restart keeps (clients keep their address)."""
    srv: ServerProcess = server_factory(extra_args=["--listen", f"127.0.0.1:{free_port()}"])
    return srv


Restart = Callable[[float], threading.Thread]


@pytest.fixture
def restart_after(fixed_port_server: ServerProcess) -> Iterator[Restart]:
    """kill -9 the server now, start it again on the same data dir and port after the
    seconds given. Each restart is waited for before the server's own teardown stops it,
    so a test that fails half-way leaves no server running."""
    threads: list[threading.Thread] = []

    def restart(seconds: float) -> threading.Thread:
        fixed_port_server.kill()

        def later() -> None:
            time.sleep(seconds)
            fixed_port_server.start()

        thread = threading.Thread(target=later)
        thread.start()
        threads.append(thread)
        return thread

    yield restart
    for thread in threads:
        thread.join()


def test_receive_waits_out_a_server_restart(
    fixed_port_server: ServerProcess, restart_after: Restart
) -> None:
    srv = fixed_port_server
    with Client(srv.address, timeout=10) as client:
        client.create_topic("t")
        ids = client.producer("t").send_batch([(b"k", b"%d" % i) for i in range(3)])
        with client.subscribe(
            "t", "s", initial_position=InitialPosition.Earliest, receiver_queue_size=1
        ) as first_consumer:  # acks are queued: its close returns once they are stored
            first_consumer.acknowledge(first_consumer.receive(timeout_millis=5000))
        consumer = client.subscribe("t", "s", receiver_queue_size=1)
        assert consumer.receive(timeout_millis=5000).message_id() == ids[1]
        restarting = restart_after(1.0)
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=300)  # the server is away: a plain timeout
        again = consumer.receive(timeout_millis=30_000)
        restarting.join()
        assert again.message_id() == ids[1]  # given out, never acknowledged: again
        assert consumer.receive(timeout_millis=5000).message_id() == ids[2]
        consumer.close()


def test_async_receive_waits_out_a_server_restart(
    fixed_port_server: ServerProcess, restart_after: Restart
) -> None:
    srv = fixed_port_server

    async def scenario() -> None:
        async with AsyncClient(srv.address, timeout=10) as client:
            await client.create_topic("t")
            producer = await client.create_producer("t")
            ids = [await producer.send(b"%d" % i) for i in range(2)]
            consumer = await client.subscribe(
                "t", "s", initial_position=InitialPosition.Earliest, receiver_queue_size=1
            )
            assert (await consumer.receive(5000)).message_id() == ids[0]
            restarting = restart_after(1.0)
            with pytest.raises(Timeout):
                await consumer.receive(300)
            again = await consumer.receive(30_000)
            await asyncio.to_thread(restarting.join)
            assert again.message_id() == ids[0]
            await consumer.close()

    asyncio.run(scenario())
