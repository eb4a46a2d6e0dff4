"""Hand-written: automatic checks for the chapters' coding exercises, one module per
chapter (ch01, ...)."""
