import shopcfg


def test_register_plugin():
    shopcfg.PLUGINS["audit"] = {"enabled": False}


def test_enable_plugin():
    # brittle (needs test_register_plugin) and state-setter of test_plugin_enabled
    shopcfg.PLUGINS["audit"]["enabled"] = True


def test_plugin_enabled():
    assert shopcfg.PLUGINS["audit"]["enabled"]
