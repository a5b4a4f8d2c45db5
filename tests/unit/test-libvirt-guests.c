/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libvirt's domains as the manager's guests (daemon/libvirt/guest-libvirt.c), driven through the
 * guest source the manager uses (guest-source.h) with a stand-in owner, against libvirt's
 * in-process test driver (test:///default: a real libvirt driver, no daemon, one running domain
 * "test" with a virtio balloon): a source turned off starts nothing; a domain becomes a guest
 * known by its UUID; a domain without a balloon is skipped, not faulty, and begins no fault
 * episode; a reload that turns libvirt off takes every guest away through the owner. */
#include <check.h>
#include <string.h>
#include <time.h>

#include <libvirt/libvirt.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/libvirt/guest-libvirt.h"
#include "tests/lib/check-run.h"

#define URI "test:///default"
#define NO_BALLOON_NAME "rs-no-balloon"

typedef struct Owner {
        Guest *guests[8];
        size_t n;
        unsigned removed;
} Owner;

static Owner owner;

static int owner_resolve_policy(void *userdata _unused_, const char *policy_name _unused_, const char *name _unused_,
                                const char *uuid _unused_, RsPolicy *ret) {
        return rs_policy_preset("balanced", ret);
}

static int owner_add_guest(void *userdata, Guest *g) {
        Owner *o = userdata;
        ck_assert_uint_lt(o->n, ARRAY_SIZE(o->guests));
        o->guests[o->n++] = g;
        return 0;
}

static void owner_remove_guest(void *userdata, Guest *g) {
        Owner *o = userdata;
        for (size_t i = 0; i < o->n; i++)
                if (o->guests[i] == g) {
                        memmove(o->guests + i, o->guests + i + 1, (o->n - i - 1) * sizeof(Guest *));
                        o->n--;
                        break;
                }
        guest_free(g);
        o->removed++;
}

static const GuestSourceOwner source_owner = {
        .resolve_policy = owner_resolve_policy,
        .add_guest = owner_add_guest,
        .remove_guest = owner_remove_guest,
};

static Guest *owner_find(const char *name) {
        for (size_t i = 0; i < owner.n; i++)
                if (strcmp(guest_name(owner.guests[i]), name) == 0)
                        return owner.guests[i];
        return NULL;
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* Runs the loop until cond() holds; the deadline is for a hang, not a timing bound. */
static void run_until(sd_event *e, bool (*cond)(void)) {
        for (uint64_t end = monotonic_usec() + 30 * USEC_PER_SEC; !cond() && monotonic_usec() < end;)
                ck_assert_int_ge(sd_event_run(e, 50 * USEC_PER_MSEC), 0);
        ck_assert(cond());
}

static bool test_running(void) {
        Guest *g = owner_find("test");
        return g && guest_phase(g) == GUEST_PHASE_RUNNING;
}

static bool no_balloon_seen(void) {
        Guest *g = owner_find(NO_BALLOON_NAME);
        return g && guest_phase(g) == GUEST_PHASE_FAULTY;
}

static Config *libvirt_config(bool enabled) {
        Config *c = NULL;
        ck_assert_int_eq(config_new_default(&c), 0);
        /* No state files: nothing outside the test is read or written. */
        free(c->state_dir);
        c->state_dir = NULL;
        c->libvirt_enabled = enabled;
        free(c->libvirt_uri);
        c->libvirt_uri = strdup(URI);
        ck_assert_ptr_nonnull(c->libvirt_uri);
        c->libvirt_manage_all = true;
        c->libvirt_agent = false;
        return c;
}

START_TEST(test_off_starts_nothing) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        Config *c = libvirt_config(false);
        void *source = (void *) 1;

        owner = (Owner) {};
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_guest_source.new(e, c, &source_owner, &owner, &source), 0);
        ck_assert_ptr_null(source);
        ck_assert_uint_eq(owner.n, 0);
        config_free(c);
}
END_TEST

START_TEST(test_domains_become_guests) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        Config *c = libvirt_config(true);
        void *source = NULL;

        owner = (Owner) {};
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_guest_source.new(e, c, &source_owner, &owner, &source), 0);
        ck_assert_ptr_nonnull(source);
        run_until(e, test_running);

        /* Known by the domain's UUID, as the source's key and as its own. */
        virConnectPtr conn = virConnectOpen(URI);
        ck_assert_ptr_nonnull(conn);
        virDomainPtr dom = virDomainLookupByName(conn, "test");
        ck_assert_ptr_nonnull(dom);
        char uuid[VIR_UUID_STRING_BUFLEN];
        ck_assert_int_eq(virDomainGetUUIDString(dom, uuid), 0);
        virDomainFree(dom);
        Guest *g = owner_find("test");
        ck_assert_int_eq(guest_source(g), GUEST_SOURCE_LIBVIRT);
        ck_assert_str_eq(guest_origin(g), uuid);
        ck_assert_str_eq(guest_uuid(g), uuid);
        ck_assert_ptr_null(guest_fault(g));

        /* A domain without a balloon: left alone by design. */
        dom = virDomainCreateXML(conn,
                                 "<domain type='test'><name>" NO_BALLOON_NAME "</name>"
                                 "<memory unit='MiB'>512</memory><os><type>hvm</type></os>"
                                 "<devices><memballoon model='none'/></devices></domain>",
                                 0);
        ck_assert_ptr_nonnull(dom);
        run_until(e, no_balloon_seen);
        g = owner_find(NO_BALLOON_NAME);
        ck_assert_str_eq(guest_state_string(g), "skipped");
        ck_assert_int_eq(guest_fault_kind(g), GUEST_FAULT_SKIPPED);
        ck_assert_msg(strncmp(guest_fault(g), "skipped: ", strlen("skipped: ")) == 0, "fault: %s", guest_fault(g));
        ck_assert_uint_eq(guest_counters(g)->faults, 0);
        /* The other domain is untouched. */
        ck_assert_str_ne(guest_state_string(owner_find("test")), "skipped");

        /* A reload that turns libvirt off takes every guest away, through the owner. */
        Config *off = libvirt_config(false);
        size_t had = owner.n;
        libvirt_guest_source.reload(&source, e, off, &source_owner, &owner);
        ck_assert_ptr_null(source);
        ck_assert_uint_eq(owner.n, 0);
        ck_assert_uint_eq(owner.removed, had);

        ck_assert_int_eq(virDomainDestroy(dom), 0);
        virDomainFree(dom);
        virConnectClose(conn);
        config_free(off);
        config_free(c);
}
END_TEST

int main(void) {
        return check_run_case("libvirt-guests", "source", NULL, NULL, 60,
                              CHECK_TESTS(test_off_starts_nothing, test_domains_become_guests));
}
