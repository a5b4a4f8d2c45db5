# qmp/ build fragment (included from the top Makefile.am)
