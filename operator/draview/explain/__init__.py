"""Why a ResourceClaim cannot be allocated: selectors (CEL), device states, counters,
taints and tolerations, capacity requests, node reach, counts and constraints."""

from draview.explain.index import DeviceIndex, IndexedDevice
from draview.explain.model import ChoiceExplanation, ClaimExplanation, RequestExplanation
from draview.explain.why import Explainer

__all__ = [
    "ChoiceExplanation",
    "ClaimExplanation",
    "DeviceIndex",
    "Explainer",
    "IndexedDevice",
    "RequestExplanation",
]
