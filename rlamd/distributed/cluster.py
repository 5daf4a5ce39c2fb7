"""Joining a Ray cluster and asking it where things are (Ray's API, in one place)."""

from __future__ import annotations

import os
import socket

import ray
from ray.util.placement_group import remove_placement_group

from rlamd.config import ConfigError

from .local import start_local
from .plan import ClusterFitError, fmt_resources

__all__ = ["alive_nodes", "connect", "nodes", "wait_placed", "where"]


def _check_reachable(address: str) -> None:
    """Fail in seconds, not minutes, when nothing listens at a ``host:port`` address
    (Ray itself keeps retrying an unreachable head for several minutes)."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return  # "auto", ray:// client addresses: Ray checks those itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(
            f"nothing answers at --ray-address {address} ({exc.strerror or exc}); is the head "
            "running (`ray start --head --port PORT`) and the port open from here?"
        ) from exc


def connect(address: str | None, needed_cpus: float, log) -> str:
    """Join ``address`` (or RAY_ADDRESS, or a running cluster), else start a local one.

    A local cluster started here gets at least ``needed_cpus`` logical CPUs, so a laptop
    can run every actor (oversubscribed, and said so).
    """
    if ray.is_initialized():
        return "already connected"
    env = {"RAY_DEDUP_LOGS": "1"}
    for k, v in env.items():
        os.environ.setdefault(k, v)
    if address and address != "local":
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"could not join the Ray cluster at --ray-address {address!r}: {str(exc).splitlines()[0]}. "
                "Start one with `ray start --head`, give the head's host:port, or leave --ray-address "
                "out to join RAY_ADDRESS / a running cluster or else start a local one"
            ) from exc
        return f"joined {address}"
    if address is None:
        try:  # RAY_ADDRESS (set in `ray job submit` jobs), else a cluster started on this node
            ray.init(address=None if os.environ.get("RAY_ADDRESS") else "auto", log_to_driver=True)
            return "joined the running cluster"
        except (ConnectionError, RuntimeError, ValueError):
            pass
    cores = os.cpu_count() or 1
    cpus = max(cores, int(needed_cpus + 0.999))
    start_local(ray, num_cpus=cpus, include_dashboard=False, log_to_driver=True)
    note = f" (more than this machine's {cores} cores: actors share them)" if cpus > cores else ""
    log(f"rlamd: started a local Ray cluster with {cpus} CPUs{note}")
    return "local"


def nodes() -> list[dict[str, float]]:
    return [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]


def alive_nodes() -> dict[str, str]:
    """Node id -> address of every alive node."""
    return {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in ray.nodes() if n.get("Alive")}


def wait_placed(group, what: str, timeout: float, layout: dict) -> None:
    ready, _ = ray.wait([group.ready()], timeout=timeout)
    if not ready:
        remove_placement_group(group)
        raise ClusterFitError(
            f"Ray could not place the {what} within {timeout:g} s: asked for {layout['asked']}; "
            f"{layout['where']}, of which {fmt_resources(ray.available_resources())} is free now "
            "(other jobs may hold the rest). Raise ray.placement_timeout_s or free resources"
        )


def where() -> dict:
    """The calling actor's node, address, pid and Ray GPU ids (for the logged layout)."""
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        "pid": os.getpid(),
        "gpus": [str(g) for g in ray.get_gpu_ids()],
    }
