# etc/ build fragment (included from the top Makefile.am): the configuration, the example
# policies, the systemd unit, the sysusers.d and tmpfiles.d files, the D-Bus policy and the polkit
# actions, each installed where its reader looks. configure asks pkg-config where systemd,
# dbus-daemon and polkitd read theirs (--with-systemdsystemunitdir, --with-sysusersdir,
# --with-tmpfilesdir, --with-catalogdir, --with-dbuspolicydir, --with-polkitactiondir override it; "no" installs
# none), so that the default prefix works too: dbus-daemon never reads /usr/local/share/dbus-1.

# rightsized reads $(rightsizeconfdir)/rightsized.conf (compiled in: daemon/local.mk).
rightsizeconfdir = $(sysconfdir)/rightsize
rightsizepolicydir = $(rightsizeconfdir)/policies

rs_policy_files = \
	etc/policies/conservative.conf etc/policies/balanced.conf \
	etc/policies/aggressive.conf etc/policies/observe-only.conf

# The shipped configuration and policies, pristine, for reference and for comparing a local
# change with a new version: $(docdir)/examples.
rsexamplesdir = $(docdir)/examples
rsexamples_DATA = etc/rightsized.conf etc/libvirt-domain-example.xml
rsexamplespoliciesdir = $(rsexamplesdir)/policies
rsexamplespolicies_DATA = $(rs_policy_files)

if HAVE_SYSTEMDSYSTEMUNITDIR
nodist_systemdsystemunit_DATA = etc/rightsized.service
endif
if HAVE_SYSUSERSDIR
sysusers_DATA = etc/sysusers.d/rightsize.conf
endif
if HAVE_TMPFILESDIR
tmpfiles_DATA = etc/tmpfiles.d/rightsize.conf
endif
if HAVE_CATALOGDIR
catalog_DATA = etc/rightsize.catalog
endif
if HAVE_DBUSPOLICYDIR
dbuspolicy_DATA = etc/org.rightsize.Manager1.conf
endif
if HAVE_POLKITACTIONDIR
polkitaction_DATA = etc/org.rightsize.policy
endif

EXTRA_DIST += etc/rightsized.conf $(rs_policy_files) etc/rightsized.service.in \
	etc/sysusers.d/rightsize.conf etc/tmpfiles.d/rightsize.conf \
	etc/org.rightsize.Manager1.conf etc/org.rightsize.policy etc/rightsize.catalog
CLEANFILES += etc/rightsized.service

# The unit needs the installed path of the daemon.
etc/rightsized.service: $(top_srcdir)/etc/rightsized.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) etc && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' $(top_srcdir)/etc/rightsized.service.in > $@.tmp && \
	mv $@.tmp $@

# The configuration and the policies are the administrator's once installed: "make install"
# puts each in $(rightsizeconfdir) only when it is not there yet, and says so when it keeps one
# (a package's conffile handling does the same for /etc/rightsize). The shipped files name
# /etc/rightsize; the installed copies name $(rightsizeconfdir). "make uninstall" removes only
# the ones nobody changed.
rs_conf_sed = sed -e 's|/etc/rightsize|$(rightsizeconfdir)|g'

install-data-hook: install-rightsize-conf
uninstall-hook: uninstall-rightsize-conf
.PHONY: install-rightsize-conf uninstall-rightsize-conf

install-rightsize-conf:
	@$(MKDIR_P) '$(DESTDIR)$(rightsizepolicydir)'
	@for f in etc/rightsized.conf $(rs_policy_files); do \
		dst='$(DESTDIR)$(rightsizeconfdir)'/$${f#etc/}; \
		if test -e "$$dst"; then \
			echo " keeping $$dst (the shipped one is in $(rsexamplesdir)/$${f#etc/})"; \
		else \
			echo " $(rs_conf_sed) $$f > $$dst"; \
			$(rs_conf_sed) '$(srcdir)'/$$f > "$$dst.tmp" && chmod 0644 "$$dst.tmp" && \
				mv "$$dst.tmp" "$$dst" || exit 1; \
		fi; \
	done
	@if test -z '$(DESTDIR)'; then \
		echo " the rightsize group and /var/lib/rightsize come at the next boot, or now with:"; \
		echo "   systemd-sysusers rightsize.conf && systemd-tmpfiles --create rightsize.conf"; \
	fi

uninstall-rightsize-conf:
	@for f in etc/rightsized.conf $(rs_policy_files); do \
		dst='$(DESTDIR)$(rightsizeconfdir)'/$${f#etc/}; \
		test -e "$$dst" || continue; \
		if $(rs_conf_sed) '$(srcdir)'/$$f | cmp -s - "$$dst"; then \
			echo " rm -f $$dst"; rm -f "$$dst"; \
		else \
			echo " keeping $$dst: changed locally"; \
		fi; \
	done
	@rmdir '$(DESTDIR)$(rightsizepolicydir)' '$(DESTDIR)$(rightsizeconfdir)' 2>/dev/null || :

# The journal catalog against daemon/log.h's MESSAGE_IDs, compiled by journalctl in a scratch root.
TESTS += tests/unit/test-journal-catalog
EXTRA_DIST += tests/unit/test-journal-catalog
