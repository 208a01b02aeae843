from __future__ import annotations

from collections.abc import Iterator

import pytest

from .cluster import Cluster, running


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One NATS server (replicas 1)."""
    yield from running(str(tmp_path_factory.mktemp("nats1")), 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three NATS servers in one cluster; every test gets all three running."""
    yield from running(str(tmp_path_factory.mktemp("nats3")), 3)


@pytest.fixture()
def three(cluster: Cluster) -> Cluster:
    cluster.start()
    return cluster


@pytest.fixture(autouse=True)
def local_dirs(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's local text segments under its own directory."""
    monkeypatch.setenv("HOLOMEM_NATS_LOCAL", str(tmp_path) + "/local")
