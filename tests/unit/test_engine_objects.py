from draview.engine.objects import pool_object_name


def test_pool_names_never_collide_and_are_dns_safe() -> None:
    a = pool_object_name("gpu.example.com-a", "b")
    b = pool_object_name("gpu.example.com", "a-b")
    assert a != b
    odd = pool_object_name("Gpu.Example.com", "rack/1_B")
    assert odd.startswith("gpu.example.com-rack-1-b-")
    assert all(c.islower() or c.isdigit() or c in ".-" for c in odd)
    assert len(pool_object_name("d" * 200, "p" * 200)) <= 253
