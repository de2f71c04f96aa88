import shopcfg


def test_configure_currency():
    # state-setter of test_pricing.py::test_price_in_eur
    shopcfg.SETTINGS["currency"] = "EUR"


def test_configure_tax():
    # state-setter of test_pricing.py::test_price_with_tax, polluter of
    # test_0_defaults.py::test_no_tax_by_default
    shopcfg.SETTINGS["tax"] = 0.25
