"""sk_app: a small application whose module-level state the statekinds tests share."""
