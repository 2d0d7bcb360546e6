from builders import device, rslice

from draview.api.slices import ResourceSlice
from draview.engine.node_match import device_reaches, slice_may_reach

LABELS = {"kubernetes.io/hostname": "node-a", "rack": "r1", "gpus": "8"}


def sel(*exprs: dict) -> dict:
    return {"nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}


def S(obj: dict) -> ResourceSlice:
    return ResourceSlice.from_object(obj)


def test_node_local_slice() -> None:
    s = S(rslice("s", [device("d")], node="node-a"))
    assert slice_may_reach(s, "node-a", {}) and not slice_may_reach(s, "node-b", {})


def test_all_nodes_and_selectors() -> None:
    assert slice_may_reach(S(rslice("s", [device("d")], node=None)), "any", {})
    s = S(
        rslice(
            "s",
            [device("d")],
            node=None,
            nodeSelector=sel({"key": "rack", "operator": "In", "values": ["r1"]}),
        )
    )
    assert slice_may_reach(s, "node-a", LABELS)
    assert not slice_may_reach(s, "node-b", {"rack": "r2"})
    gt = S(
        rslice(
            "s",
            [device("d")],
            node=None,
            nodeSelector=sel({"key": "gpus", "operator": "Gt", "values": ["4"]}),
        )
    )
    assert slice_may_reach(gt, "node-a", LABELS)
    assert not slice_may_reach(gt, "node-a", {"gpus": "2"})
    fields = S(
        rslice(
            "s",
            [device("d")],
            node=None,
            nodeSelector={
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
                        ]
                    }
                ]
            },
        )
    )
    assert slice_may_reach(fields, "node-b", {}) and not slice_may_reach(fields, "node-a", {})


def test_per_device_node_selection() -> None:
    devs = [
        {**device("local"), "nodeName": "node-a"},
        {**device("everywhere"), "allNodes": True},
        {
            **device("rack2"),
            "nodeSelector": sel({"key": "rack", "operator": "In", "values": ["r2"]}),
        },
    ]
    s = S(rslice("s", devs, node=None, perDeviceNodeSelection=True))
    reach = {d.name: device_reaches(s, d, "node-a", LABELS) for d in s.devices}
    assert reach == {"local": True, "everywhere": True, "rack2": False}
    assert not device_reaches(s, s.devices[0], "node-b", {})
