"""A ``nats://`` store's options, its refused opens and its checkpoint call answer as a
store directory's do (one server)."""

from __future__ import annotations

import os

from holomem import Memory, Store

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
