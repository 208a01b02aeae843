"""A ``nats://`` store's options, its refused opens and its checkpoint call answer as a
store directory's do (one server)."""

from __future__ import annotations

import asyncio
import os

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import Memory, Store
from holomem.errors import InvalidError, NotFoundError

from .cluster import Cluster, needs_server
from .scan import files_with

pytestmark = needs_server


def test_checkpoint_on_a_stream_store_writes_nothing_and_answers_none(single: Cluster
                                                                      ) -> None:
    with Store.open(single.url("ckpt")) as store:
        Memory(store).remember("the ringed plover nests on shingle")
        assert store.checkpoint() is None
        assert store.checkpoint() is None  # and again, with nothing new
        local = os.environ["HOLOMEM_NATS_LOCAL"]
        names = [n for _root, _dirs, files in os.walk(local) for n in files]
        assert not any(n.startswith("checkpoint-") for n in names)
        assert files_with(local, b"ringed plover") != []  # the node's text segment is there


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sync=st.one_of(st.text(max_size=8), st.none(), st.integers(), st.booleans(),
                      st.lists(st.sampled_from(["full", "batch", "none"]), max_size=2)))
def test_a_bad_sync_on_a_stream_store_is_the_same_invalid_request_as_on_a_directory(
        single: Cluster, tmp_path_factory: pytest.TempPathFactory, sync: object) -> None:
    if sync in ("full", "batch", "none"):
        return
    directory = str(tmp_path_factory.mktemp("dir") / "store")
    with pytest.raises(InvalidError) as on_dir:
        Store.open(directory, sync=sync)  # type: ignore[arg-type]
    with pytest.raises(InvalidError) as on_stream:
        Store.open(single.url("badsync"), sync=sync)  # type: ignore[arg-type]
    assert on_stream.value.message == on_dir.value.message
    assert "sync must be one of full, batch, none" in on_stream.value.message


def test_an_address_option_given_twice_or_a_local_with_nul_is_invalid(single: Cluster
                                                                      ) -> None:
    for bad in (single.url("twice", replicas=1) + "&replicas=3",
                single.url("twice", lease=5) + "&lease=5",
                single.url("nul", local="%00x")):
        with pytest.raises(InvalidError):
            Store.open(bad)


def _server_streams(cluster: Cluster) -> set[str]:
    """Every stream on the server (a key-value bucket is a stream ``KV_<bucket>``)."""
    async def names() -> set[str]:
        nc = await nats.connect(cluster.nodes[0].url)
        try:
            return {s.config.name for s in await nc.jetstream().streams_info()}
        finally:
            await nc.close()

    return asyncio.run(names())


def test_an_open_refused_as_not_found_leaves_nothing_on_the_server_or_this_node(
        single: Cluster) -> None:
    local = os.environ["HOLOMEM_NATS_LOCAL"]
    before = _server_streams(single)
    for store in ("typo", "typo-2"):
        with pytest.raises(NotFoundError):
            Store.open(single.url(store), read_only=True)
        with pytest.raises(NotFoundError):
            Store.open(single.url(store), create=False)
    assert _server_streams(single) == before
    assert not os.path.exists(local)
    # ... and a store that exists opens both ways, each node directory gone on close
    with Store.open(single.url("there")) as store:
        Memory(store).remember("a dunlin probes the mud")
    with Store.open(single.url("there"), create=False) as writer, \
            Store.open(single.url("there"), read_only=True) as follower:
        assert writer.revision == follower.revision > 0
    assert os.listdir(os.path.join(local, "there")) == []
