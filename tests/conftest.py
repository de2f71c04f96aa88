collect_ignore = ["data"]
