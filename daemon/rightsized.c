/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized: keeps KVM guests at their working set plus a margin. It always runs in the
 * foreground (systemd Type=notify); --check-config only parses and prints the effective
 * configuration. */
#include <errno.h>
#include <grp.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/conf.h"
#include "daemon/log.h"
#include "daemon/manager.h"

static const char *arg_config;
static bool arg_config_optional;
static bool arg_check_config;

static void help(void) {
        printf("Usage: rightsized [OPTIONS]\n\n"
               "Right-sizes the memory of KVM guests by finding their working set.\n\n"
               "  -h --help            show this help\n"
               "     --version         show the version\n"
               "  -c --config PATH     configuration file (default %s)\n"
               "     --check-config    parse the configuration and the policies, print the\n"
               "                       effective configuration, and exit\n",
               config_default_path());
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_CHECK_CONFIG };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "config", required_argument, NULL, 'c' },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "hc:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        puts("rightsized " RIGHTSIZE_VERSION);
                        return 0;
                case 'c':
                        arg_config = optarg;
                        break;
                case ARG_CHECK_CONFIG:
                        arg_check_config = true;
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "rightsized: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        /* The default file is optional (compiled-in defaults and drop-ins apply); one named
         * with --config must exist: a typo must not start a daemon with the defaults. */
        arg_config_optional = !arg_config;
        if (!arg_config)
                arg_config = config_default_path();
        return 1;
}

static int check_config(void) {
        _cleanup_(config_freep) Config *config = NULL;
        _cleanup_free_ char *error = NULL;
        RsPolicySet set = {};
        int r;

        r = config_load(arg_config, arg_config_optional, &config, &error);
        if (r < 0) {
                fprintf(stderr, "%s\n", error ?: strerror(-r));
                return EXIT_FAILURE;
        }
        free(error);
        error = NULL;
        /* The policies are part of what a reload would take. */
        r = manager_load_policies(config->policy_dir, &set, &error);
        /* Each invalid policy was logged as it was found (r > 0 counts them). */
        if (r < 0 && r != -ENOENT)
                fprintf(stderr, "%s\n", error ?: strerror(-r));
        if (r > 0 || (r < 0 && r != -ENOENT)) {
                rs_policy_set_clear(&set);
                return EXIT_FAILURE;
        }
        free(error);
        error = NULL;
        r = manager_check_unmatched_policy(&set, config, &error);
        rs_policy_set_clear(&set);
        if (r < 0) {
                fprintf(stderr, "%s\n", error ?: strerror(-r));
                return EXIT_FAILURE;
        }
        /* Not an error (the group may be created after the package), but nobody could read
         * until it exists: an operator checking the configuration wants to hear it. */
        if (config->read_group && config->read_group[0] && !getgrnam(config->read_group))
                fprintf(stderr, "warning: read-group = %s: no such group; only root can read rightsized's guests "
                        "until it exists (groupadd %s)\n", config->read_group, config->read_group);
        if (config_print(config, true, stdout) < 0 || fflush(stdout) != 0)
                return EXIT_FAILURE;
        return EXIT_SUCCESS;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si _unused_, void *userdata) {
        Manager *m = userdata;
        (void) s;
        log_info("SIGHUP: reloading %s", m->config_path);
        (void) manager_reload(m, NULL);
        return 0;
}

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        (void) s;
        log_info("%s: stopping", strsignal((int) si->ssi_signo));
        manager_shutdown(m);
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL;
        Config *config = NULL;
        sigset_t mask;
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        if (arg_check_config)
                return check_config();

        log_open();
        r = config_load(arg_config, arg_config_optional, &config, &error);
        if (r < 0) {
                log_error("%s", error ?: strerror(-r));
                return EXIT_FAILURE;
        }
        log_set_max_level(config->log_level);

        sigemptyset(&mask);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        /* A QEMU that goes away mid-write must not kill the daemon. */
        signal(SIGPIPE, SIG_IGN);

        r = sd_event_default(&event);
        if (r < 0) {
                config_free(config);
                return log_error_errno(r, "Cannot create the event loop: %m"), EXIT_FAILURE;
        }
        r = manager_new(event, arg_config, config, &m);
        if (r < 0) {
                config_free(config);
                return log_error_errno(r, "Cannot create the manager: %m"), EXIT_FAILURE;
        }
        m->config_optional = arg_config_optional;
        if (sd_event_add_signal(event, NULL, SIGHUP, on_sighup, m) < 0 ||
            sd_event_add_signal(event, NULL, SIGTERM, on_terminate, m) < 0 ||
            sd_event_add_signal(event, NULL, SIGINT, on_terminate, m) < 0)
                return log_error("Cannot watch signals"), EXIT_FAILURE;

        r = manager_start(m);
        if (r < 0)
                return EXIT_FAILURE;

        r = sd_event_loop(event);
        if (r < 0 && r == m->exit_error)
                return log_info("Stopped"), EXIT_FAILURE; /* why was logged when it happened */
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m"), EXIT_FAILURE;
        log_info("Stopped");
        return EXIT_SUCCESS;
}
