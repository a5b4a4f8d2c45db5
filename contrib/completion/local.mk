# contrib/completion/: rightsizectl's bash and zsh completions (included from the top Makefile.am).
# Both ask rightsizectl itself for its commands, options and policies (the hidden --list-verbs,
# --list-options, --list-policies: the Verb table and the getopt table stay the one source) and
# the daemon for the guest names (`rightsizectl list --name`, quietly, under a short timeout).
#
# bash-completion loads a completion by the command's name: the file is installed as
# $(bashcompletiondir)/rightsizectl (configure: pkg-config's bash-completion completionsdir, or
# --with-bashcompletiondir). zsh's goes to $(zshcompletiondir)/_rightsizectl (configure:
# $(datadir)/zsh/site-functions, or --with-zshcompletiondir; Debian's is vendor-completions).

if HAVE_ZSHCOMPLETIONDIR
zshcompletion_DATA = contrib/completion/_rightsizectl
endif

install-data-hook: install-rightsizectl-bash-completion
uninstall-hook: uninstall-rightsizectl-bash-completion
.PHONY: install-rightsizectl-bash-completion uninstall-rightsizectl-bash-completion

install-rightsizectl-bash-completion:
if HAVE_BASHCOMPLETIONDIR
	$(MKDIR_P) '$(DESTDIR)$(bashcompletiondir)'
	$(INSTALL_DATA) '$(srcdir)/contrib/completion/rightsizectl.bash' '$(DESTDIR)$(bashcompletiondir)/rightsizectl'
endif

uninstall-rightsizectl-bash-completion:
if HAVE_BASHCOMPLETIONDIR
	rm -f '$(DESTDIR)$(bashcompletiondir)/rightsizectl'
endif

EXTRA_DIST += contrib/completion/rightsizectl.bash contrib/completion/_rightsizectl

# Sources the bash completion in a non-interactive bash, with a stand-in rightsizectl for the
# guest names (no daemon), and checks the zsh one parses (when zsh is installed).
TESTS += tests/unit/test-ctl-completion
EXTRA_DIST += tests/unit/test-ctl-completion
