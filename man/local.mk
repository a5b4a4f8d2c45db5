# Build rules for man/ (see the top Makefile.am).
# Hand-written man(7) pages: nothing to generate, groff (or mandoc) renders them as they are.

dist_man_MANS = \
	man/rightsized.8 \
	man/rightsizectl.1 \
	man/rightsize-qmp-query.1 \
	man/rightsized.conf.5 \
	man/rightsize.policy.5

# Renders every page with groff -ww and fails on any warning; checks that every config key,
# policy key, preset, state, rightsizectl command and option, and metric is documented.
TESTS += tests/unit/test-man-pages
EXTRA_DIST += tests/unit/test-man-pages

# systemd-analyze security --offline on the built unit: its exposure score stays under the
# threshold recorded in the test (see README.md, Security).
TESTS += tests/unit/test-unit-security
EXTRA_DIST += tests/unit/test-unit-security
