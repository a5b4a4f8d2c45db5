/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The manager (daemon/manager.c) over guest sources of the test's own: this program defines
 * guest_sources[] (rightsized's is daemon/guest-sources.c, which names the transports' rooms),
 * so the guests come from a fake source whose guests have fake drivers
 * (tests/lib/fake-guest-driver.c). No guest, no QMP socket, no libvirt; the system bus is
 * pointed at a path where none listens, so the API is down from the start, as the daemon
 * tolerates. What is checked: policies selected for the guests, a name in use refused and taken
 * on once free, the reload path (a new configuration and policy directory taken whole, a bad
 * one refused with everything kept), the arbitration hooks and the metrics file fed by the
 * cycles, and the stop that leaves every guest at the shutdown action's size. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/size.h"
#include "daemon/guest-driver.h"
#include "daemon/guest-source.h"
#include "daemon/manager.h"
#include "daemon/state-file.h"
#include "daemon/state-lock.h"
#include "tests/lib/check-run.h"
#include "tests/lib/fake-guest-driver.h"
#include "tests/lib/test-util.h"

/* ---- the fake source: guests the test "discovers" ---- */

#define FAKE_GUESTS_MAX 8

typedef struct FakeSource {
        sd_event *event;
        const Config *config;
        const GuestSourceOwner *owner;
        void *userdata;
        Guest *guests[FAKE_GUESTS_MAX]; /* the ones the owner took */
        size_t n;
        bool async;                     /* its guests' drivers answer the shutdown themselves */
        unsigned reloads, retries;
        char retried[64];               /* the origin retry() was last asked for */
} FakeSource;

static FakeSource *source; /* the QEMU source's instance, while there is one */

static int fake_source_new(sd_event *event, const Config *config, const GuestSourceOwner *owner, void *userdata,
                           void **ret) {
        FakeSource *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (FakeSource) { .event = event, .config = config, .owner = owner, .userdata = userdata };
        source = s;
        *ret = s;
        return 0;
}

static void fake_source_free(void *instance) {
        if (instance == source)
                source = NULL;
        free(instance);
}

/* The way qemu-guests.c follows a reload: policies selected again, the state directory. */
static void fake_source_reload(void **instance, sd_event *event _unused_, const Config *config,
                               const GuestSourceOwner *owner _unused_, void *userdata _unused_) {
        FakeSource *s = *instance;
        if (!s)
                return;
        s->reloads++;
        s->config = config;
        for (size_t i = 0; i < s->n; i++) {
                RsPolicy p;
                (void) s->owner->resolve_policy(s->userdata, NULL, guest_name(s->guests[i]), NULL, &p);
                (void) guest_set_policy(s->guests[i], &p);
                (void) guest_set_state_dir(s->guests[i], config->state_dir);
        }
}

/* A guest found at origin, attached at 4 GiB: the owner's result (-EEXIST: refused, freed). */
static int discover(const char *name, const char *origin, Guest **ret) {
        RsPolicy policy;
        Guest *g = NULL;

        ck_assert_ptr_nonnull(source);
        ck_assert_uint_lt(source->n, FAKE_GUESTS_MAX);
        (void) source->owner->resolve_policy(source->userdata, NULL, name, NULL, &policy);
        FakeGuestDriver *f = fake_guest_driver_new();
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(guest_new(source->event, GUEST_SOURCE_QEMU, name, NULL, origin, source->config->state_dir,
                                   &policy, source->owner->guest_hooks, source->userdata,
                                   source->async ? &fake_guest_driver_async : &fake_guest_driver, f, &g),
                         0);
        GuestResources res = { .base_memory = 4 * GIB, .balloon_actual = 4 * GIB };
        ck_assert_int_eq(guest_attach(g, &res), 0);
        int r = source->owner->add_guest(source->userdata, g);
        if (r < 0) {
                guest_free(g);
                return r;
        }
        source->guests[source->n++] = g;
        if (ret)
                *ret = g;
        return 0;
}

/* The source loses one of its guests (its socket went): the owner saves and frees it. */
static void vanish(Guest *g) {
        for (size_t i = 0; i < source->n; i++)
                if (source->guests[i] == g) {
                        source->guests[i] = source->guests[--source->n];
                        break;
                }
        source->owner->remove_guest(source->userdata, g);
}

static void fake_source_retry(void *instance, const char *origin, const char *name) {
        FakeSource *s = instance;
        s->retries++;
        snprintf(s->retried, sizeof(s->retried), "%s", origin);
        (void) discover(name, origin, NULL);
}

static const GuestSourceOps fake_qemu_source = {
        .source = GUEST_SOURCE_QEMU,
        .new = fake_source_new,
        .free = fake_source_free,
        .reload = fake_source_reload,
        .retry = fake_source_retry,
};

/* libvirt guests are off in every configuration here ([libvirt] enabled = no). */
static int off_source_new(sd_event *event _unused_, const Config *config _unused_,
                          const GuestSourceOwner *owner _unused_, void *userdata _unused_, void **ret) {
        *ret = NULL;
        return 0;
}

static void off_source_free(void *instance _unused_) {
}

static void off_source_reload(void **instance _unused_, sd_event *event _unused_, const Config *config _unused_,
                              const GuestSourceOwner *owner _unused_, void *userdata _unused_) {
}

static void off_source_retry(void *instance _unused_, const char *origin _unused_, const char *name _unused_) {
}

static const GuestSourceOps off_libvirt_source = {
        .source = GUEST_SOURCE_LIBVIRT,
        .new = off_source_new,
        .free = off_source_free,
        .reload = off_source_reload,
        .retry = off_source_retry,
};

/* What the manager drives: in rightsized, daemon/guest-sources.c. */
const GuestSourceOps *const guest_sources[_GUEST_SOURCE_MAX] = {
        [GUEST_SOURCE_QEMU] = &fake_qemu_source,
        [GUEST_SOURCE_LIBVIRT] = &off_libvirt_source,
};

/* ---- the fixture: a configuration in a directory of its own, a started manager ---- */

static char *dir;
static char *conf_path, *policy_dir, *metrics_path;
static sd_event *event;
static Manager *manager;
static uint64_t stats_clock;

static void write_config(const char *shutdown_action, const char *unmatched, const char *state_subdir) {
        _cleanup_free_ char *text = NULL;
        ck_assert_int_ge(asprintf(&text,
                                  "[daemon]\npolicy-dir = %s\nstate-dir = %s/%s\nmetrics-path = %s\n"
                                  "shutdown-action = %s\nhost-reserve = 1G\n"
                                  "[guests]\nunmatched-policy = %s\n[libvirt]\nenabled = no\n",
                                  policy_dir, dir, state_subdir, metrics_path, shutdown_action, unmatched),
                         0);
        test_write_file(conf_path, text);
}

static void write_policy(const char *file, const char *text) {
        _cleanup_free_ char *path = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s", policy_dir, file), 0);
        test_write_file(path, text);
}

static void setup(void) {
        Config *config = NULL;
        _cleanup_free_ char *error = NULL;

        /* The API's bus where none listens: the manager goes on without it, as it must. */
        dir = test_mkdtemp();
        _cleanup_free_ char *bus = NULL;
        ck_assert_int_ge(asprintf(&bus, "unix:path=%s/no-bus", dir), 0);
        ck_assert_int_eq(setenv("DBUS_SYSTEM_BUS_ADDRESS", bus, 1), 0);
        (void) unsetenv("NOTIFY_SOCKET");
        (void) unsetenv("WATCHDOG_USEC");
        ck_assert_int_ge(asprintf(&conf_path, "%s/rightsized.conf", dir), 0);
        ck_assert_int_ge(asprintf(&policy_dir, "%s/policies", dir), 0);
        ck_assert_int_ge(asprintf(&metrics_path, "%s/metrics.prom", dir), 0);
        ck_assert_int_eq(mkdir(policy_dir, 0755), 0);
        write_policy("small.conf", "[policy]\npreset = balanced\nmatch = web-*\nmax = 3G\n");
        write_config("max", "balanced", "state");

        ck_assert_int_eq(config_load(conf_path, false, &config, &error), 0);
        ck_assert_int_eq(sd_event_new(&event), 0);
        ck_assert_int_eq(manager_new(event, conf_path, config, &manager), 0);
        ck_assert_int_eq(manager_start(manager), 0);
        ck_assert_ptr_nonnull(source);
        ck_assert_ptr_nonnull(manager_api_error(manager)); /* no bus: said, not fatal */
        stats_clock = (uint64_t) time(NULL) - 3600;
}

static void teardown(void) {
        manager = manager_free(manager);
        event = sd_event_unref(event);
        ck_assert_ptr_null(source);
        test_rm_rf(dir);
        free(dir);
        free(conf_path);
        free(policy_dir);
        free(metrics_path);
}

static void cycle(Guest *g, uint64_t balloon_actual) {
        ck_assert_int_eq(fake_guest_cycle(g, balloon_actual, ++stats_clock), 0);
}

/* The loop's turns for what is due now (deferred work, a timer due at once), not waiting for
 * anything: the other timers (the bus's retry, the state files' upkeep) are seconds or hours
 * away. */
static void run_loop(void) {
        for (unsigned i = 0; i < 8; i++)
                ck_assert_int_ge(sd_event_run(event, 0), 0);
}

/* The manager asked the loop to exit (sd_event_exit()), with success. */
static bool exit_requested(void) {
        int code = -1;
        return sd_event_get_exit_code(event, &code) >= 0 && code == 0;
}

static bool file_exists(const char *path) {
        return access(path, F_OK) == 0;
}

/* ---- the tests ---- */

/* Each guest gets the first policy file that matches it, else unmatched-policy. */
START_TEST(test_policies_selected) {
        Guest *web, *db;
        ck_assert_int_eq(discover("web-1", "/run/web-1.qmp", &web), 0);
        ck_assert_int_eq(discover("db", "/run/db.qmp", &db), 0);
        ck_assert_str_eq(guest_policy(web)->name, "small");
        ck_assert_uint_eq(guest_max(web), 3 * GIB);
        ck_assert_str_eq(guest_policy(db)->name, "balanced");
        ck_assert_ptr_eq(manager_find_guest(manager, "db"), db);
        ck_assert_ptr_null(manager_find_guest(manager, "nobody"));
        ck_assert_uint_eq(manager_guests_managed(manager), 2);

        RsPolicy p;
        ck_assert_int_eq(manager_resolve_policy(manager, "no-such-policy", "db", NULL, &p), -ENOENT);
        ck_assert_str_eq(p.name, "balanced"); /* the fallback */
        ck_assert_int_eq(manager_resolve_policy(manager, "aggressive", "db", NULL, &p), 0);
        ck_assert_str_eq(p.name, "aggressive");
        ck_assert_int_eq(manager_set_guest_policy(manager, db, "no-such-policy"), -ENOENT);
        ck_assert_int_eq(manager_set_guest_policy(manager, db, "small"), 0);
        ck_assert_str_eq(guest_policy(db)->name, "small");
        ck_assert(!manager_has_libvirt(manager));
        ck_assert_int_eq(manager_set_domain_policy(manager, "dom", "small"), -ENOTCONN);
}
END_TEST

/* A second guest of a name in use is refused (said once however often it comes); once the name
 * is free, its source is asked for it again, from the loop. */
START_TEST(test_name_in_use) {
        Guest *first;
        ck_assert_int_eq(discover("twin", "/run/a.qmp", &first), 0);
        ck_assert_int_eq(discover("twin", "/run/b.qmp", NULL), -EEXIST);
        ck_assert_int_eq(discover("twin", "/run/b.qmp", NULL), -EEXIST);
        ck_assert_uint_eq(manager->n_refused, 1);
        ck_assert_str_eq(manager->refused[0].origin, "/run/b.qmp");
        ck_assert_uint_eq(manager_guests_managed(manager), 1);

        vanish(first);
        ck_assert_ptr_null(manager_find_guest(manager, "twin"));
        ck_assert_uint_eq(source->retries, 0); /* not from inside the removal */
        run_loop();
        ck_assert_uint_eq(source->retries, 1);
        ck_assert_str_eq(source->retried, "/run/b.qmp");
        Guest *second = manager_find_guest(manager, "twin");
        ck_assert_ptr_nonnull(second);
        ck_assert_str_eq(guest_origin(second), "/run/b.qmp");
        ck_assert_uint_eq(manager->n_refused, 0);
}
END_TEST

/* A good reload takes the new configuration and policy directory whole, and the source selects
 * its guests' policies again. */
START_TEST(test_reload_takes_the_new_configuration) {
        Guest *web, *db;
        ck_assert_int_eq(discover("web-1", "/run/web-1.qmp", &web), 0);
        ck_assert_int_eq(discover("db", "/run/db.qmp", &db), 0);
        write_policy("small.conf", "[policy]\npreset = balanced\nmatch = web-*\nmax = 2G\n");
        write_policy("db.conf", "[policy]\npreset = conservative\nmatch = db\n");
        write_config("keep", "conservative", "state2");

        _cleanup_free_ char *error = NULL;
        ck_assert_int_eq(manager_reload(manager, &error), 0);
        ck_assert_ptr_null(error);
        ck_assert_int_eq(manager->config->shutdown_action, SHUTDOWN_ACTION_KEEP);
        ck_assert_uint_eq(manager->policies.n, 2);
        ck_assert_uint_eq(source->reloads, 1);
        ck_assert_uint_eq(guest_max(web), 2 * GIB);
        ck_assert_str_eq(guest_policy(db)->name, "db");
        /* The new state directory is made and locked. */
        _cleanup_free_ char *state2 = NULL;
        ck_assert_int_ge(asprintf(&state2, "%s/state2", dir), 0);
        ck_assert(file_exists(state2));
}
END_TEST

/* A reload that fails keeps everything as it was and names what is wrong: a bad key, a bad
 * policy file, an unmatched-policy that names no policy. */
START_TEST(test_reload_refused_keeps_everything) {
        Guest *web;
        ck_assert_int_eq(discover("web-1", "/run/web-1.qmp", &web), 0);

        test_write_file(conf_path, "[daemon]\nno-such-key = 1\n");
        char *error = NULL;
        ck_assert_int_lt(manager_reload(manager, &error), 0);
        ck_assert_ptr_nonnull(error);
        ck_assert_ptr_nonnull(strstr(error, "no-such-key"));
        free(error);
        error = NULL;
        ck_assert_int_eq(manager->config->shutdown_action, SHUTDOWN_ACTION_MAX);

        write_config("keep", "balanced", "state");
        write_policy("broken.conf", "[policy]\nmax = lots\n");
        ck_assert_int_eq(manager_reload(manager, &error), -EINVAL);
        ck_assert_ptr_nonnull(error);
        ck_assert_ptr_nonnull(strstr(error, "broken"));
        free(error);
        error = NULL;
        ck_assert_int_eq(manager->config->shutdown_action, SHUTDOWN_ACTION_MAX);
        ck_assert_uint_eq(manager->policies.n, 1);

        _cleanup_free_ char *broken = NULL;
        ck_assert_int_ge(asprintf(&broken, "%s/broken.conf", policy_dir), 0);
        ck_assert_int_eq(unlink(broken), 0);
        write_config("keep", "no-such-policy", "state");
        ck_assert_int_eq(manager_reload(manager, &error), -ENOENT);
        ck_assert_ptr_nonnull(strstr(error, "no-such-policy"));
        free(error);
        ck_assert_int_eq(manager->config->shutdown_action, SHUTDOWN_ACTION_MAX);
        ck_assert_uint_eq(source->reloads, 0);
        ck_assert_str_eq(guest_policy(web)->name, "small");
        ck_assert_uint_eq(guest_max(web), 3 * GIB);
}
END_TEST

/* The cycles go through the manager's hooks: the host's memory, the arbitration (a host with room
 * gives each guest its wish) and the metrics file. */
START_TEST(test_cycles_through_the_manager) {
        Guest *web, *db;
        ck_assert_int_eq(discover("web-1", "/run/web-1.qmp", &web), 0);
        ck_assert_int_eq(discover("db", "/run/db.qmp", &db), 0);
        cycle(web, 4 * GIB);
        cycle(db, 4 * GIB);
        ck_assert(guest_has_decision(web));
        ck_assert(guest_has_decision(db));
        /* web's policy caps it at 3 GiB: that is its wish, and the host has room for it. */
        ck_assert_uint_eq(guest_want(web), 3 * GIB);
        ck_assert_uint_eq(guest_target(web), 3 * GIB);
        ck_assert_uint_eq(guest_target(db), guest_want(db));
        /* Counted from the size each had when taken over, or its max when less: web's 3 GiB. */
        ck_assert_uint_eq(manager_reclaimed(manager), 0);
        cycle(web, 3 * GIB);
        ck_assert_uint_eq(manager_reclaimed(manager), 0);
        cycle(db, 3 * GIB);
        ck_assert_uint_eq(manager_reclaimed(manager), GIB);

        /* The metrics file is rewritten at most once a second as cycles come; a change of the
         * API's state forces it (the test cannot wait for the second). */
        manager_api_changed(manager);
        _cleanup_free_ char *metrics = test_read_file(metrics_path);
        ck_assert_ptr_nonnull(metrics);
        ck_assert_ptr_nonnull(strstr(metrics, "web-1"));
        ck_assert_ptr_nonnull(strstr(metrics, "db"));
}
END_TEST

/* The stop: no more cycles, each guest left at the shutdown action's size (max here), the state
 * files written, the metrics file removed, and the loop told to exit. */
START_TEST(test_shutdown) {
        Guest *db;
        ck_assert_int_eq(discover("db", "/run/db.qmp", &db), 0);
        cycle(db, 4 * GIB);
        ck_assert(file_exists(metrics_path));
        FakeGuestDriver *f = guest_driver_data(db, &fake_guest_driver);
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(f->balloon_calls, 0);
        guest_set_balloon_actual(db, 3 * GIB); /* squeezed, by whoever: max gives it back */

        manager_shutdown(manager);
        ck_assert_uint_eq(f->stops, 1);
        ck_assert_uint_eq(f->balloon_calls, 1);
        ck_assert_uint_eq(f->last_balloon, 4 * GIB);
        ck_assert(!file_exists(metrics_path));
        _cleanup_free_ char *state = NULL;
        ck_assert_int_ge(asprintf(&state, "%s/state", dir), 0);
        _cleanup_free_ char *path = NULL;
        ck_assert_int_eq(state_file_path(state, "db", &path), 0);
        ck_assert(file_exists(path));
        ck_assert(exit_requested());
        /* Said once: a second signal changes nothing. */
        manager_shutdown(manager);
        ck_assert_uint_eq(f->stops, 1);
}
END_TEST

/* A driver that answers its shutdown call later: the manager waits for it before it exits. */
START_TEST(test_shutdown_waits_for_the_guests) {
        source->async = true;
        Guest *g;
        ck_assert_int_eq(discover("slow", "/run/slow.qmp", &g), 0);
        cycle(g, 4 * GIB);
        cycle(g, 4 * GIB);
        FakeGuestDriver *f = guest_driver_data(g, &fake_guest_driver_async);
        ck_assert_ptr_nonnull(f);
        guest_set_balloon_actual(g, 3 * GIB); /* squeezed, by whoever: max gives it back */

        manager_shutdown(manager);
        ck_assert_uint_eq(f->shutdown_calls, 1);
        ck_assert_uint_eq(f->shutdown_balloon, 4 * GIB);
        ck_assert_uint_eq(manager->shutdown_pending, 1);
        ck_assert(!exit_requested());
        ck_assert(file_exists(metrics_path));
        fake_guest_driver_finish_shutdown(f);
        ck_assert_uint_eq(manager->shutdown_pending, 0);
        ck_assert(!file_exists(metrics_path));
        ck_assert(exit_requested());
}
END_TEST

/* A second daemon on the same state directory is refused at its start: both would manage the
 * same guests. */
START_TEST(test_second_manager_refused) {
        Config *config = NULL;
        _cleanup_free_ char *error = NULL;
        Manager *second = NULL;
        ck_assert_int_eq(config_load(conf_path, false, &config, &error), 0);
        ck_assert_int_eq(manager_new(event, conf_path, config, &second), 0);
        ck_assert_int_eq(manager_start(second), -EBUSY);
        manager_free(second);
}
END_TEST

/* A reload to a state directory another daemon holds is refused, and changes nothing. */
START_TEST(test_reload_to_a_held_state_dir) {
        _cleanup_free_ char *held = NULL;
        ck_assert_int_ge(asprintf(&held, "%s/held", dir), 0);
        ck_assert_int_eq(mkdir(held, 0700), 0);
        int fd = -1;
        pid_t holder = 0;
        ck_assert_int_eq(state_lock_take(held, &fd, &holder), 0);
        write_config("keep", "balanced", "held");
        char *error = NULL;
        ck_assert_int_eq(manager_reload(manager, &error), -EBUSY);
        ck_assert_ptr_nonnull(strstr(error, "belongs to another rightsized"));
        free(error);
        ck_assert_int_eq(manager->config->shutdown_action, SHUTDOWN_ACTION_MAX);
        close(fd);
}
END_TEST

/* A reload looks for the state files of guests long gone (state-remove-after as it is now):
 * removed, but for the files of the guests it has. */
START_TEST(test_reload_removes_old_state_files) {
        Guest *db;
        ck_assert_int_eq(discover("db", "/run/db.qmp", &db), 0);
        _cleanup_free_ char *state = NULL;
        ck_assert_int_ge(asprintf(&state, "%s/state", dir), 0);
        const char *names[] = { "db", "gone" };
        char *paths[2] = {};
        struct timespec old[2] = { { .tv_sec = time(NULL) - 100 * 86400 }, { .tv_sec = time(NULL) - 100 * 86400 } };
        for (size_t i = 0; i < 2; i++) {
                GuestStateRecord rec;
                ck_assert_int_eq(guest_state_init(&rec, names[i], NULL), 0);
                rec.saved_at_usec = (uint64_t) old[0].tv_sec * 1000000;
                ck_assert_int_eq(state_file_save(state, &rec), 0);
                ck_assert_int_eq(state_file_path(state, names[i], &paths[i]), 0);
                ck_assert_int_eq(utimensat(AT_FDCWD, paths[i], old, 0), 0);
        }
        _cleanup_free_ char *text = NULL;
        ck_assert_int_ge(asprintf(&text,
                                  "[daemon]\npolicy-dir = %s\nstate-dir = %s\nmetrics-path = %s\n"
                                  "state-remove-after = 30d\n[libvirt]\nenabled = no\n",
                                  policy_dir, state, metrics_path),
                         0);
        test_write_file(conf_path, text);
        ck_assert_int_eq(manager_reload(manager, NULL), 0);
        ck_assert(file_exists(paths[0]));
        ck_assert(!file_exists(paths[1]));
        free(paths[0]);
        free(paths[1]);
}
END_TEST

/* A refused guest that goes away before its name is free is forgotten: nothing to take on. */
START_TEST(test_refused_guest_gone) {
        Guest *first;
        ck_assert_int_eq(discover("twin", "/run/a.qmp", &first), 0);
        ck_assert_int_eq(discover("twin", "/run/b.qmp", NULL), -EEXIST);
        ck_assert_uint_eq(manager->n_refused, 1);
        source->owner->refused_gone(source->userdata, "/run/b.qmp");
        ck_assert_uint_eq(manager->n_refused, 0);
        vanish(first);
        run_loop();
        ck_assert_uint_eq(source->retries, 0);
        ck_assert(!source->owner->stopping(source->userdata));
}
END_TEST

int main(void) {
        return check_run_case("daemon-manager", "manager", setup, teardown, 0,
                              CHECK_TESTS(test_policies_selected, test_name_in_use,
                                          test_reload_takes_the_new_configuration,
                                          test_reload_refused_keeps_everything, test_cycles_through_the_manager,
                                          test_shutdown, test_shutdown_waits_for_the_guests,
                                          test_second_manager_refused, test_reload_to_a_held_state_dir,
                                          test_reload_removes_old_state_files, test_refused_guest_gone));
}
