# Build rules for man/ (see the top Makefile.am).
