import shopcfg


def test_price_in_eur():
    # brittle: needs test_a_setup.py::test_configure_currency
    assert shopcfg.SETTINGS["currency"] == "EUR"


def test_price_with_tax():
    # brittle: needs test_a_setup.py::test_configure_tax
    assert shopcfg.price(100.0) == "125.00 EUR" or shopcfg.SETTINGS["tax"] == 0.25
