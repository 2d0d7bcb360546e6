"""One replica's controller, assembled: the store and node index that informers fill
(ingest), the queue of dirty pools, the worker that judges them (reconcile) and hands
them to the writer, and the Events for people. `draview run` (operator_main.py) builds
one, connects informers, the elector, kopf and the HTTP port to it, and starts them.

    watch event -> Ingest -> Store, NodeIndex -> PoolQueue -> Worker -> Reconciler -> Writer
                                                      Reconciler -> CapacityProbes (fit)
"""

from __future__ import annotations

from draview.controller.capacity import CapacityProbes
from draview.controller.event_rounds import Explanations, PostEvent, PostSliceEvent
from draview.controller.ingest import Ingest
from draview.controller.node_index import NodeIndex
from draview.controller.queue import PoolQueue, Role
from draview.controller.reconcile import Reconciler, Settings
from draview.controller.status_requests import StatusRequests
from draview.controller.store import Store
from draview.controller.worker import Worker
from draview.controller.writer import Writer

__all__ = ["Controller", "Settings"]


class Controller:
    def __init__(
        self,
        writer: Writer,
        settings: Settings,
        post_event: PostEvent | None = None,
        post_slice_event: PostSliceEvent | None = None,
    ) -> None:
        self.settings = settings
        self.writer = writer
        self.role = Role()
        self.store = Store()
        self.nodes = NodeIndex()
        self.queue = PoolQueue(self.role)
        self.ingest = Ingest(self.store, self.nodes, self.queue)
        self.reconciler = Reconciler(self.store, self.nodes, writer, settings)
        self.worker = Worker(self.queue, self.reconciler, writer)
        self.explanations = Explanations(
            self.role, self.reconciler, writer, settings, post_event, post_slice_event
        )
        # Its own request layer, sharing the writer's token bucket and fence: a probe
        # that cannot be written never makes the status objects' /readyz fail.
        probe_requests = StatusRequests(writer.requests.api, writer.bucket, writer.may_write)
        self.capacity = CapacityProbes(self.role, self.reconciler, probe_requests, settings)

    @property
    def leader(self) -> bool:
        return self.role.leader

    @leader.setter
    def leader(self, value: bool) -> None:
        self.role.leader = value
