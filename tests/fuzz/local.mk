# Build rules for tests/fuzz/ (see the top Makefile.am).
