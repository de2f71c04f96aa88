import shopcfg


def test_turn_on_debug():
    # polluter of test_output.py::test_quiet_output
    shopcfg.FLAGS["debug"] = True
    assert shopcfg.log_line("x") == "DEBUG x"


def test_reset_debug():
    # cleaner between test_turn_on_debug and test_output.py::test_quiet_output
    shopcfg.FLAGS["debug"] = False
