"""Hand-written: the subcommands of the `tinybert` command line (see
tinybert/__main__.py)."""
