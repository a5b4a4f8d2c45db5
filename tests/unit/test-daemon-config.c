/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/conf.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

static char *dir, *path;

static void setup(void) {
        dir = test_mkdtemp();
        ck_assert_int_ge(asprintf(&path, "%s/rightsized.conf", dir), 0);
}

static void teardown(void) {
        test_rm_rf(dir);
        free(dir);
        free(path);
}

/* Parses text as a config file; on failure returns NULL and sets *error. */
static Config *load_text(const char *text, char **error) {
        Config *c = NULL;

        test_write_file(path, text);
        *error = NULL;
        if (config_load(path, false, &c, error) < 0) {
                ck_assert_ptr_nonnull(*error);
                ck_assert_ptr_null(c);
                return NULL;
        }
        ck_assert_ptr_null(*error);
        return c;
}

static char *print_config(const Config *c) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(config_print(c, false, f), 0);
        fclose(f);
        return buf;
}

static size_t strv_len(char **l) {
        size_t n = 0;
        while (l[n])
                n++;
        return n;
}

static const char default_text[] =
        "[daemon]\n"
        "policy-dir = %s/policies\n"
        "state-dir = /var/lib/rightsize\n"
        "log-level = info\n"
        "host-reserve = 1G\n"
        "metrics-path =\n"
        "shutdown-action = estimate\n"
        "read-group = rightsize\n"
        "state-stale-after = 7d\n"
        "state-remove-after = 90d\n"
        "\n"
        "[guests]\n"
        "manage = *\n"
        "exclude =\n"
        "unmatched-policy = observe-only\n"
        "\n"
        "[qemu]\n"
        "qmp-sockets = /run/qemu/*.qmp\n"
        "agent-socket-pattern = %%d/%%n.qga\n"
        "qemu-users =\n"
        "\n"
        "[libvirt]\n"
        "enabled = yes\n"
        "uri = qemu:///system\n"
        "manage-all = no\n"
        "agent = no\n"
        "call-timeout = 15s\n";

START_TEST(test_defaults_printed) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(freep) char *text = NULL, *expected = NULL;

        ck_assert_int_eq(config_new_default(&c), 0);
        ck_assert_int_eq(c->log_level, LOG_INFO);
        ck_assert_int_eq(c->shutdown_action, SHUTDOWN_ACTION_ESTIMATE);
        ck_assert_ptr_null(c->metrics_path);
        text = print_config(c);
        ck_assert_int_ge(asprintf(&expected, default_text, config_default_dir()), 0);
        ck_assert_str_eq(text, expected);
        ck_assert_ptr_nonnull(strstr(config_default_path(), "/rightsized.conf"));
}
END_TEST

static const char full_text[] =
        "# every key, none at its default\n"
        "[daemon]\n"
        "policy-dir = /srv/policies\n"
        "state-dir=/srv/state\n"
        "log-level = debug ; inline comment\n"
        "host-reserve = 2.5%\n"
        "metrics-path = /var/lib/prometheus/node-exporter/rightsize.prom\n"
        "shutdown-action = max\n"
        "read-group = kvm-ops\n"
        "\n"
        "[guests]\n"
        "; comments with semicolons too\n"
        "manage = web-* 0f1e2d3c-*\n"
        "exclude = web-test*\n"
        "[qemu]\n"
        "qmp-sockets = /run/qemu/*.qmp /srv/vms/[a-z]*.sock\n"
        "agent-socket-pattern = /run/qga/%n.sock\n"
        "qemu-users = qemu 64055\n"
        "[libvirt]\n"
        "enabled = no\n"
        "uri = qemu+ssh://host/system\n"
        "manage-all = true\n"
        "call-timeout = 1500ms\n";

START_TEST(test_parse_every_key) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_(freep) char *error = NULL;

        c = load_text(full_text, &error);
        ck_assert_msg(c != NULL, "%s", error);
        ck_assert_str_eq(c->policy_dir, "/srv/policies");
        ck_assert_str_eq(c->state_dir, "/srv/state");
        ck_assert_int_eq(c->log_level, LOG_DEBUG);
        ck_assert(c->host_reserve.relative);
        ck_assert_uint_eq(c->host_reserve.basis_points, 250);
        ck_assert_str_eq(c->metrics_path, "/var/lib/prometheus/node-exporter/rightsize.prom");
        ck_assert_int_eq(c->shutdown_action, SHUTDOWN_ACTION_MAX);
        ck_assert_str_eq(c->read_group, "kvm-ops");
        ck_assert_uint_eq(strv_len(c->manage), 2);
        ck_assert_str_eq(c->manage[0], "web-*");
        ck_assert_str_eq(c->manage[1], "0f1e2d3c-*");
        ck_assert_uint_eq(strv_len(c->exclude), 1);
        ck_assert_str_eq(c->exclude[0], "web-test*");
        ck_assert_uint_eq(strv_len(c->qmp_sockets), 2);
        ck_assert_str_eq(c->qmp_sockets[1], "/srv/vms/[a-z]*.sock");
        ck_assert_str_eq(c->agent_socket_pattern, "/run/qga/%n.sock");
        ck_assert_uint_eq(strv_len(c->qemu_users), 2);
        ck_assert_str_eq(c->qemu_users[1], "64055");
        ck_assert(!c->libvirt_enabled);
        ck_assert_str_eq(c->libvirt_uri, "qemu+ssh://host/system");
        ck_assert(c->libvirt_manage_all);
        ck_assert_uint_eq(c->libvirt_call_timeout_usec, 1500 * 1000);
}
END_TEST

START_TEST(test_round_trip) {
        static const char *const inputs[] = {
                "", full_text,
                "[daemon]\nhost-reserve = 1073741825\nmetrics-path = /m.prom\nread-group =\n"
                "[guests]\nmanage =\n[qemu]\nqmp-sockets =\nagent-socket-pattern =\n",
                "[daemon]\nhost-reserve = 1536 MiB\nlog-level = 3\n",
        };

        for (size_t i = 0; i < ARRAY_SIZE(inputs); i++) {
                _cleanup_(config_freep) Config *a = NULL, *b = NULL;
                _cleanup_(freep) char *error = NULL, *error2 = NULL, *text = NULL, *text2 = NULL;

                a = load_text(inputs[i], &error);
                ck_assert_msg(a != NULL, "input %zu: %s", i, error);
                text = print_config(a);
                b = load_text(text, &error2);
                ck_assert_msg(b != NULL, "printed config of input %zu does not parse: %s\n%s", i, error2, text);
                ck_assert_msg(config_equal(a, b), "input %zu: round trip differs:\n%s", i, text);
                text2 = print_config(b);
                ck_assert_str_eq(text, text2);
        }

        /* config_equal() itself notices differences, or the round trip would prove nothing. */
        _cleanup_(config_freep) Config *x = NULL, *y = NULL;
        ck_assert_int_eq(config_new_default(&x), 0);
        ck_assert_int_eq(config_new_default(&y), 0);
        ck_assert(config_equal(x, y));
        y->host_reserve.bytes++;
        ck_assert(!config_equal(x, y));
        y->host_reserve = x->host_reserve;
        y->libvirt_manage_all = !y->libvirt_manage_all;
        ck_assert(!config_equal(x, y));
}
END_TEST

START_TEST(test_errors_name_file_line_key) {
        static const struct {
                const char *text;
                unsigned line;
                const char *message;
        } cases[] = {
                { "[daemon]\nlog-level = info\n\nhost-reserve = lots\n", 4, "key 'host-reserve': invalid size 'lots'" },
                { "[daemon]\nhost-reserve = 99999999999E\n", 2, "key 'host-reserve': size out of range '99999999999E'" },
                { "[daemon]\nhost-reserve = 150%\n", 2, "key 'host-reserve': size out of range '150%'" },
                { "[daemon]\nfrobnicate = 1\n", 2, "unknown key 'frobnicate' in section [daemon]" },
                { "[deamon]\nlog-level = info\n", 2, "key 'log-level' is in an unknown section [deamon]" },
                { "log-level = info\n", 1, "key 'log-level' is outside of any section" },
                { "[daemon]\nlog-level = info\nlog-level = debug\n", 3, "key 'log-level' is set twice (first on line 2)" },
                { "[daemon]\nlog-level = loud\n", 2, "key 'log-level': invalid log level 'loud'" },
                { "[daemon]\nstate-dir = var/lib\n", 2, "key 'state-dir': 'var/lib' is not an absolute path" },
                { "[daemon]\nmetrics-path = /var/lib/\n", 2, "key 'metrics-path': '/var/lib/' is not an absolute file path" },
                { "[daemon]\nshutdown-action = explode\n", 2, "key 'shutdown-action': invalid value 'explode'" },
                { "[daemon]\nread-group = 9lives\n", 2, "key 'read-group': invalid group name '9lives'" },
                { "[libvirt]\nenabled = maybe\n", 2, "key 'enabled': invalid boolean 'maybe'" },
                { "[libvirt]\nuri =\n", 2, "key 'uri': invalid URI ''" },
                { "[libvirt]\ncall-timeout = 500ms\n", 2, "key 'call-timeout': '500ms' out of range" },
                { "[libvirt]\ncall-timeout = 11min\n", 2, "key 'call-timeout': '11min' out of range" },
                { "[libvirt]\ncall-timeout = soon\n", 2, "key 'call-timeout': invalid duration 'soon'" },
                { "[qemu]\nqmp-sockets = /run/*/x.qmp\n", 2, "key 'qmp-sockets': '/run/*/x.qmp' has wildcards in its directory part" },
                { "[qemu]\nqmp-sockets = relative/*.qmp\n", 2, "key 'qmp-sockets': 'relative/*.qmp' is not an absolute path" },
                { "[qemu]\nagent-socket-pattern = %d/%x\n", 2, "key 'agent-socket-pattern': invalid pattern '%d/%x'" },
                { "[qemu]\nagent-socket-pattern = %n.qga\n", 2, "key 'agent-socket-pattern': pattern '%n.qga' does not give an absolute path" },
                { "[qemu]\nqemu-users = qemu ev/il\n", 2, "key 'qemu-users': invalid user name 'ev/il'" },
                { "[daemon]\nstate-dir = /a\n  /b\n", 3, "key 'state-dir': continuation lines are only allowed for lists" },
                { "[daemon]\nthis line has no equals sign\nlog-level = info\n", 2, "syntax error" },
                { "[daemon\nlog-level = info\n", 1, "syntax error" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_(freep) char *error = NULL, *expected = NULL;
                Config *c = load_text(cases[i].text, &error);

                ck_assert_msg(c == NULL, "case %zu accepted", i);
                ck_assert_int_ge(asprintf(&expected, "%s:%u: %s", path, cases[i].line, cases[i].message), 0);
                ck_assert_msg(strncmp(error, expected, strlen(expected)) == 0, "case %zu: got '%s', want '%s'", i,
                              error, expected);
        }
}
END_TEST

START_TEST(test_hostile_lines) {
        _cleanup_(freep) char *error = NULL, *expected = NULL, *text = NULL;
        char longline[400];
        FILE *f;
        Config *c = NULL;
        int r;

        /* inih splits long lines into two silently; we refuse them. */
        memset(longline, 'a', sizeof(longline) - 1);
        longline[sizeof(longline) - 1] = '\0';
        ck_assert_int_ge(asprintf(&text, "[daemon]\npolicy-dir = /%s\n", longline), 0);
        c = load_text(text, &error);
        ck_assert_ptr_null(c);
        ck_assert_int_ge(asprintf(&expected, "%s:2: line is longer than", path), 0);
        ck_assert_msg(strncmp(error, expected, strlen(expected)) == 0, "got '%s'", error);

        /* A NUL byte in the middle of a line. */
        free(TAKE_PTR(error));
        free(TAKE_PTR(expected));
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fwrite("[daemon]\nlog-level = in\0fo\n", 1, 28, f);
        fclose(f);
        r = config_load(path, false, &c, &error);
        ck_assert_int_eq(r, -EINVAL);
        ck_assert_int_ge(asprintf(&expected, "%s:2: line contains a NUL byte", path), 0);
        ck_assert_str_eq(error, expected);

        /* Control characters in values. */
        free(TAKE_PTR(error));
        c = load_text("[daemon]\nread-group = ab\x01\n", &error);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(strstr(error, ":2: key 'read-group': value contains control characters"));

        /* Binary garbage. */
        free(TAKE_PTR(error));
        c = load_text("\x7f" "ELF\x02\x01\x01\n\xff\xfe[[[\n", &error);
        ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_failed_reload_keeps_old) {
        _cleanup_(config_freep) Config *current = NULL;
        _cleanup_(freep) char *error = NULL;
        Config *before;

        test_write_file(path, "[daemon]\nlog-level = debug\n");
        ck_assert_int_eq(config_load(path, false, &current, &error), 0);
        before = current;

        test_write_file(path, "[daemon]\nlog-level = warning\nhost-reserve = lots\n");
        ck_assert_int_eq(config_load(path, false, &current, &error), -EINVAL);
        ck_assert_ptr_eq(current, before);
        ck_assert_int_eq(current->log_level, LOG_DEBUG);
        ck_assert_ptr_nonnull(strstr(error, ":3: key 'host-reserve'"));
}
END_TEST

START_TEST(test_lists) {
        _cleanup_(config_freep) Config *c = NULL, *d = NULL, *e = NULL;
        _cleanup_(freep) char *error = NULL;

        /* Repeats and continuation lines add; the first assignment replaces the default. */
        c = load_text("[qemu]\nqmp-sockets = /a/*.qmp\n   /b/*.qmp\tc/../x\n", &error);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(strstr(error, ":3: key 'qmp-sockets': 'c/../x' is not an absolute path"));
        free(TAKE_PTR(error));

        c = load_text("[qemu]\nqmp-sockets = /a/*.qmp\n   /b/*.qmp\nqmp-sockets = /c/x.qmp\n", &error);
        ck_assert_msg(c != NULL, "%s", error);
        ck_assert_uint_eq(strv_len(c->qmp_sockets), 3);
        ck_assert_str_eq(c->qmp_sockets[0], "/a/*.qmp");
        ck_assert_str_eq(c->qmp_sockets[1], "/b/*.qmp");
        ck_assert_str_eq(c->qmp_sockets[2], "/c/x.qmp");

        /* An empty assignment clears, later ones add again. */
        d = load_text("[guests]\nmanage = a b\nmanage =\nmanage = c\n", &error);
        ck_assert_msg(d != NULL, "%s", error);
        ck_assert_uint_eq(strv_len(d->manage), 1);
        ck_assert_str_eq(d->manage[0], "c");

        e = load_text("[guests]\nmanage =\n", &error);
        ck_assert_msg(e != NULL, "%s", error);
        ck_assert_uint_eq(strv_len(e->manage), 0);
        ck_assert(!config_guest_is_managed(e, "anything", NULL));
}
END_TEST

START_TEST(test_missing_file) {
        _cleanup_(config_freep) Config *c = NULL, *def = NULL;
        _cleanup_(freep) char *error = NULL, *missing = NULL;

        ck_assert_int_ge(asprintf(&missing, "%s/none.conf", dir), 0);
        ck_assert_int_eq(config_load(missing, false, &c, &error), -ENOENT);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(strstr(error, "none.conf: cannot open: No such file or directory"));

        ck_assert_int_eq(config_load(missing, true, &c, NULL), 0);
        ck_assert_int_eq(config_new_default(&def), 0);
        ck_assert(config_equal(c, def));
}
END_TEST

START_TEST(test_dropins) {
        _cleanup_(config_freep) Config *c = NULL, *again = NULL;
        _cleanup_(freep) char *error = NULL, *dropins = NULL, *a = NULL, *b = NULL, *ignored = NULL,
                              *printed = NULL, *want = NULL, *reprinted = NULL;

        ck_assert_int_ge(asprintf(&dropins, "%s.d", path), 0);
        ck_assert_int_ge(asprintf(&a, "%s/10-a.conf", dropins), 0);
        ck_assert_int_ge(asprintf(&b, "%s/20-b.conf", dropins), 0);
        ck_assert_int_ge(asprintf(&ignored, "%s/30-c.conf.dpkg-old", dropins), 0);
        ck_assert_int_eq(mkdir(dropins, 0755), 0);

        test_write_file(path, "[daemon]\nlog-level = info\nmetrics-path = /run/m.prom\n[guests]\nmanage = web-*\n");
        /* Written in the opposite order of their names: name order is what counts. */
        test_write_file(b, "[daemon]\nlog-level = debug\n[guests]\nmanage = db-*\n  cache-*\n");
        test_write_file(a, "[daemon]\nlog-level = warning\n[guests]\nexclude = web-test*\n");
        test_write_file(ignored, "[daemon]\nlog-level = err\n");

        ck_assert_msg(config_load(path, false, &c, &error) == 0, "%s", error);
        ck_assert_int_eq(c->log_level, LOG_DEBUG);                  /* 20-b over 10-a over the main file */
        ck_assert_str_eq(c->metrics_path, "/run/m.prom");           /* only the main file sets it */
        ck_assert_uint_eq(strv_len(c->manage), 2);                  /* 20-b's list replaced the main file's */
        ck_assert_str_eq(c->manage[0], "db-*");
        ck_assert_str_eq(c->manage[1], "cache-*");
        ck_assert_str_eq(c->exclude[0], "web-test*");

        /* --check-config says which file set each key, and its output still reads back. */
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        ck_assert_int_eq(config_print(c, true, f), 0);
        fclose(f);
        printed = buf;
        ck_assert_int_ge(asprintf(&want, "# %s:2\nlog-level = debug\n", b), 0);
        ck_assert_msg(strstr(printed, want), "no origin for log-level in:\n%s", printed);
        free(want);
        ck_assert_int_ge(asprintf(&want, "# %s:3\nmetrics-path = /run/m.prom\n", path), 0);
        ck_assert_msg(strstr(printed, want), "no origin for metrics in:\n%s", printed);
        unsigned origins = 0; /* the four keys the files set; no comment above a default */
        for (const char *p = printed; (p = strstr(p, "# ")); p++)
                origins++;
        ck_assert_uint_eq(origins, 4);
        test_write_file(path, printed);
        test_rm_rf(dropins);
        ck_assert_msg(config_load(path, false, &again, &error) == 0, "%s", error);
        ck_assert(config_equal(c, again));

        /* A broken drop-in fails the whole load, naming its file and line; a missing main file
         * with missing_ok still takes the drop-ins. */
        config_free(c);
        c = NULL;
        ck_assert_int_eq(mkdir(dropins, 0755), 0);
        test_write_file(a, "[daemon]\nlog-level = loud\n");
        ck_assert_int_eq(config_load(path, false, &c, &error), -EINVAL);
        ck_assert_ptr_null(c);
        free(want);
        ck_assert_int_ge(asprintf(&want, "%s:2:", a), 0);
        ck_assert_msg(strstr(error, want), "error '%s' does not name %s", error, want);
        free(error);
        error = NULL;
        test_write_file(a, "[daemon]\nlog-level = notice\n");
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(config_load(path, false, &c, &error), -ENOENT);
        free(error);
        error = NULL;
        ck_assert_msg(config_load(path, true, &c, &error) == 0, "%s", error);
        ck_assert_int_eq(c->log_level, LOG_NOTICE);
}
END_TEST

START_TEST(test_unmatched_policy) {
        _cleanup_(config_freep) Config *def = NULL, *c = NULL;
        _cleanup_(freep) char *error = NULL;

        /* Installed and started, the daemon resizes nothing nobody chose a policy for. */
        ck_assert_int_eq(config_new_default(&def), 0);
        ck_assert_str_eq(def->unmatched_policy, "observe-only");

        c = load_text("[guests]\nunmatched-policy = web.fast-1\n", &error);
        ck_assert_msg(c != NULL, "%s", error);
        ck_assert_str_eq(c->unmatched_policy, "web.fast-1");
        ck_assert(!config_equal(c, def));

        static const char *const bad[] = { "", "../etc/passwd", ".hidden", "two words", "a/b" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_(freep) char *text = NULL, *err = NULL;
                ck_assert_int_ge(asprintf(&text, "[guests]\nunmatched-policy = %s\n", bad[i]), 0);
                ck_assert_ptr_null(load_text(text, &err));
                ck_assert_msg(strstr(err, "invalid policy name"), "'%s': %s", bad[i], err);
        }
}
END_TEST

START_TEST(test_guest_matching) {
        _cleanup_(config_freep) Config *c = NULL, *all = NULL;
        _cleanup_(freep) char *error = NULL;

        c = load_text("[guests]\nmanage = web-* DB 0F1E2D3C-*\nexclude = web-test*\n", &error);
        ck_assert_msg(c != NULL, "%s", error);
        ck_assert(config_guest_is_managed(c, "web-1", NULL));
        ck_assert(!config_guest_is_managed(c, "web-test-1", NULL));
        ck_assert(config_guest_is_managed(c, "DB", ""));
        ck_assert(!config_guest_is_managed(c, "db", NULL)); /* names are case-sensitive */
        ck_assert(config_guest_is_managed(c, "other", "0f1e2d3c-0000-4000-8000-000000000000"));
        ck_assert(!config_guest_is_managed(c, "other", "11111111-0000-4000-8000-000000000000"));

        ck_assert_int_eq(config_new_default(&all), 0);
        ck_assert(config_guest_is_managed(all, "anything", NULL));
}
END_TEST

START_TEST(test_agent_socket_path) {
        _cleanup_(freep) char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;

        ck_assert_int_eq(config_agent_socket_path("%d/%n.qga", "/run/qemu/web1.qmp", &a), 0);
        ck_assert_str_eq(a, "/run/qemu/web1.qga");
        ck_assert_int_eq(config_agent_socket_path("/run/qga/%f-100%%", "/run/qemu/web1.qmp", &b), 0);
        ck_assert_str_eq(b, "/run/qga/web1.qmp-100%");
        ck_assert_int_eq(config_agent_socket_path("%d/%n.agent", "/x.sock", &c), 0);
        ck_assert_str_eq(c, "//x.sock.agent");
        ck_assert_int_eq(config_agent_socket_path("%d/%n.qga", "/run/qemu/.qmp", &e), 0);
        ck_assert_str_eq(e, "/run/qemu/.qmp.qga"); /* ".qmp" alone is a name, not a suffix */
        ck_assert_int_eq(config_agent_socket_path("%d/%n%", "/run/qemu/a.qmp", &d), -EINVAL);
        ck_assert_int_eq(config_agent_socket_path(NULL, "/run/qemu/a.qmp", &d), 0);
        ck_assert_ptr_null(d);
}
END_TEST

/* The example shipped in etc/ documents every key with its default: it must parse, and give the
 * defaults. (policy-dir follows --sysconfdir, the example shows the packaged /etc.) */
START_TEST(test_shipped_example) {
        _cleanup_(config_freep) Config *example = NULL, *defaults = NULL;
        _cleanup_(freep) char *error = NULL, *example_path = NULL, *text = NULL, *printed = NULL;
        const char *srcdir = getenv("top_srcdir") ?: TEST_TOP_SRCDIR;

        ck_assert_int_ge(asprintf(&example_path, "%s/etc/rightsized.conf", srcdir), 0);
        ck_assert_msg(config_load(example_path, false, &example, &error) == 0, "%s", error);
        ck_assert_int_eq(config_new_default(&defaults), 0);
        ck_assert_str_eq(example->policy_dir, "/etc/rightsize/policies");
        free(defaults->policy_dir);
        defaults->policy_dir = strdup(example->policy_dir);
        ck_assert(config_equal(example, defaults));

        /* Every key printed by --check-config appears, uncommented, in the example. */
        text = test_read_file(example_path);
        printed = print_config(defaults);
        for (char *line = strtok(printed, "\n"); line; line = strtok(NULL, "\n")) {
                _cleanup_(freep) char *needle = NULL;
                if (line[0] == '[')
                        continue;
                ck_assert_int_ge(asprintf(&needle, "\n%.*s =", (int) strcspn(line, " "), line), 0);
                ck_assert_msg(strstr(text, needle), "example lacks '%s'", line);
        }
}
END_TEST

int main(void) {
        return check_run_case("daemon-config", "config", setup, teardown, 0,
                              CHECK_TESTS(test_defaults_printed, test_parse_every_key, test_round_trip,
                                          test_errors_name_file_line_key, test_hostile_lines,
                                          test_failed_reload_keeps_old, test_lists, test_missing_file, test_dropins,
                                          test_unmatched_policy, test_guest_matching, test_agent_socket_path,
                                          test_shipped_example));
}
