import os


def test_default_mode():
    # victim of test_sets_mode
    assert os.environ.get("SHOP_MODE") is None


def test_sets_mode():
    os.environ["SHOP_MODE"] = "batch"
    assert os.environ["SHOP_MODE"] == "batch"
