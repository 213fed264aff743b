"""Ray for evaluation cells: the session (local or a cluster), its checks and its one error.

Ray starts in-process on the local cores unless an address is given
(``address`` or ``$RAY_ADDRESS``): then :func:`ray_session` runs on that
cluster, after checking that the address answers (:func:`_check_reachable`)
and that every node has the project installed (:func:`check_nodes`). Every
way this can fail is a :class:`RayError`, one line, before any work starts.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "CONNECT_TIMEOUT_S",
    "EVAL_MODULES",
    "RayError",
    "check_nodes",
    "ray_address",
    "ray_session",
]

#: Modules every node must import to run evaluation cells.
EVAL_MODULES = ("envs", "baselines", "agents")
#: Seconds to wait for a cluster's address to accept a connection.
CONNECT_TIMEOUT_S = 5.0


class RayError(ValueError):
    """Ray cannot be used as asked: unreachable address, a node without the package, bad workers."""


def ray_address(address: str | None) -> str | None:
    """The cluster to use: ``address``, else ``$RAY_ADDRESS``, else ``None`` (local, in-process)."""
    return address or os.environ.get("RAY_ADDRESS") or None


def _check_reachable(address: str) -> None:
    """A TCP connection to ``host:port`` (or ``ray://host:port``), so a wrong address fails fast."""
    if address in ("auto", "local"):
        return  # ray.init finds (or fails to find) the machine's cluster itself
    hostport = re.sub(r"^[a-z]+://", "", address).rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RayError(
            f"Ray address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by default), "
            "ray://HOST:PORT (Ray client) or auto"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayError(
            f"cannot reach the Ray cluster at {address!r} ({exc.strerror or exc}); "
            "start it with `ray start --head` on the head node, or leave out --ray-address "
            "(and RAY_ADDRESS) to run on the local cores"
        ) from None


def check_nodes(modules: Sequence[str]) -> None:
    """Every alive node imports ``modules`` (the project is installed there), else :class:`RayError`.

    One zero-CPU task pinned to each node, so busy nodes answer too.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def probe(names: list[str]) -> list[str]:
        # nested, so the task travels by value: a node without the project can still run it
        import importlib

        missing = []
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # ImportError, or a broken install
                missing.append(name)
        return missing

    remote = ray.remote(num_cpus=0, max_retries=0)(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = {
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(list(modules)): n
        for n in nodes
    }
    bad = []
    for ref, node in refs.items():
        missing = ray.get(ref)
        if missing:
            bad.append(f"{node.get('NodeManagerAddress', node['NodeID'])} lacks {missing}")
    if bad:
        raise RayError(
            "Ray cluster node(s) without the tiergym package: "
            + "; ".join(bad)
            + " (install the project on every node, into the Python environment Ray runs there)"
        )


def _connect(addr: str, kw: dict[str, Any]) -> None:
    """``ray.init`` on the cluster at ``addr``, checked to answer first; else :class:`RayError`."""
    import ray

    _check_reachable(addr)
    try:
        ray.init(address=addr, **kw)
    except Exception as exc:  # ConnectionError, a version mismatch, ...
        msg = " ".join(str(exc).split())[:300]
        hint = ""
        if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
            hint = (
                "; if the cluster uses token authentication (`ray start`'s default), set "
                "RAY_AUTH_MODE=token here, with the cluster's token in ~/.ray/auth_token "
                "or RAY_AUTH_TOKEN"
            )
        raise RayError(f"cannot connect to the Ray cluster at {addr!r}: {msg}{hint}") from None


@contextmanager
def ray_session(
    workers: int | None = None,
    address: str | None = None,
    modules: Sequence[str] = EVAL_MODULES,
) -> Iterator[int]:
    """Ray, initialised for the duration; yields the CPUs available to tasks.

    Without an address (``address``, ``$RAY_ADDRESS``) Ray starts in-process on
    ``workers`` local CPUs (default: all cores), nothing to run beforehand. With
    one, it connects to that cluster after checking the address answers, and
    every node is checked for ``modules``. A Ray already initialised by the
    caller (a test, a notebook) is used as it is and left running.

    Raises:
        RayError: a bad worker count, an unreachable address, a node without
            the package; one line each, before any work starts.
    """
    import ray

    if workers is not None and workers < 1:
        raise RayError(f"--workers must be at least 1, got {workers}")
    if ray.is_initialized():
        check_nodes(modules)
        yield int(ray.cluster_resources().get("CPU", 1))
        return
    addr = ray_address(address)
    kw: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
    }
    if addr is not None:
        _connect(addr, kw)
    else:
        # "local": a new in-process Ray, even where `ray start` once ran on this machine
        # bound to the loopback address: a local run opens no port on the network
        ray.init(
            address="local",
            num_cpus=workers or os.cpu_count() or 1,
            _node_ip_address="127.0.0.1",
            **kw,
        )
    try:
        check_nodes(modules)
        yield int(ray.cluster_resources().get("CPU", 1))
    finally:
        ray.shutdown()
