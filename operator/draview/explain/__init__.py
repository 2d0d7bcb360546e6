"""Why a ResourceClaim cannot be allocated: selectors (CEL), device states, counters,
taints and tolerations, capacity requests, node reach, counts and constraints."""

from draview.explain.catalog import Catalog
from draview.explain.index import DeviceIndex, IndexedDevice
from draview.explain.model import ChoiceExplanation, ClaimExplanation, RequestExplanation
from draview.explain.why import Explainer

__all__ = [
    "Catalog",
    "ChoiceExplanation",
    "ClaimExplanation",
    "DeviceIndex",
    "Explainer",
    "IndexedDevice",
    "RequestExplanation",
]
