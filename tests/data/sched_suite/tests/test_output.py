import shopcfg


def test_quiet_output():
    assert shopcfg.log_line("hello") == "hello"
