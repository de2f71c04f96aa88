import shopcfg


def test_no_tax_by_default():
    # victim of test_a_setup.py::test_configure_tax
    assert shopcfg.SETTINGS["tax"] is None
    assert shopcfg.price(10.0) == f"10.00 {shopcfg.SETTINGS['currency']}"
