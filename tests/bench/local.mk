# Build rules for tests/bench/ (see the top Makefile.am).
