#!/bin/sh
# Generates ./configure from configure.ac and the Makefile.am fragments.
set -e
cd "$(dirname "$0")"
autoreconf --force --install --warnings=all
