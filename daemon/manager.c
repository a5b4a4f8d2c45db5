/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/guest-source.h"
#include "daemon/host/host-thp.h"
#include "daemon/memory-report.h"
#include "daemon/log.h"
#include "daemon/manager-bus.h"
#include "daemon/manager.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "common/size.h"
#include "common/time-util.h"
#include "daemon/state-file.h"
#include "daemon/state-lock.h"
#include "policies/arbiter.h"

/* The metrics file and STATUS= line are refreshed at most this often, whatever the number of
 * guests ticking. */
#define PUBLISH_INTERVAL_USEC (1 * USEC_PER_SEC)
#define HOST_READ_INTERVAL_USEC (500 * USEC_PER_MSEC)
#define SHUTDOWN_TIMEOUT_USEC (5 * USEC_PER_SEC)
/* The state files of guests long gone are looked for this long after the start (time for
 * discovery and libvirt to have reported the guests present, whose files are kept), then daily,
 * and at each reload. */
#define STATE_AGE_FIRST_USEC (1 * 3600 * USEC_PER_SEC)
#define STATE_AGE_INTERVAL_USEC (24 * 3600 * USEC_PER_SEC)

static bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

/* mkdir -p, mode 0700: state files describe guests, nobody else's business. */
static int mkdir_p_simple(const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(copy, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(copy, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* ---- policies ---- */

typedef struct PolicyErrors {
        unsigned n;
        char *first;
} PolicyErrors;

static void on_policy_error(const RsPolicyError *e, void *userdata) {
        PolicyErrors *pe = userdata;
        char buf[512];

        rs_policy_error_format(e, buf, sizeof(buf));
        log_error("Invalid policy: %s", buf);
        if (pe->n++ == 0)
                pe->first = strdup(buf);
}

int manager_load_policies(const char *dir, RsPolicySet *ret, char **ret_error) {
        RsPolicySet set = {};
        PolicyErrors pe = {};
        int r;

        r = rs_policy_set_load_dir(&set, dir, on_policy_error, &pe);
        if (r < 0) {
                rs_policy_set_clear(&set);
                free(pe.first);
                return config_fail(ret_error, r, "%s: cannot read the policy directory: %s", dir, strerror(-r));
        }
        if (ret_error)
                *ret_error = TAKE_PTR(pe.first);
        free(pe.first);
        *ret = set;
        return r;
}

/* A policy by name: a file of the policy directory, else a preset. */
static int policy_by_name(const RsPolicySet *set, const char *policy_name, RsPolicy *ret) {
        for (size_t i = 0; i < set->n; i++)
                if (streq(set->policies[i].name, policy_name)) {
                        *ret = set->policies[i];
                        return 0;
                }
        if (rs_policy_preset(policy_name, ret) < 0)
                return -ENOENT;
        snprintf(ret->name, sizeof(ret->name), "%s", policy_name);
        return 0;
}

int manager_check_unmatched_policy(const RsPolicySet *set, const Config *config, char **ret_error) {
        RsPolicy p;
        if (policy_by_name(set, config->unmatched_policy, &p) >= 0)
                return 0;
        return config_fail(ret_error, -ENOENT,
                           "unmatched-policy = %s: no such policy in %s, nor a preset "
                           "(observe-only, conservative, balanced, aggressive)",
                           config->unmatched_policy, config->policy_dir);
}

/* The guest's policy: the first file that matches it, else unmatched-policy (checked when the
 * configuration was taken, so the preset below is only a last resort). */
static void select_policy(Manager *m, const char *name, const char *uuid, RsPolicy *ret) {
        const RsPolicy *p = rs_policy_set_select(&m->policies, name, uuid);
        if (p) {
                *ret = *p;
                return;
        }
        if (policy_by_name(&m->policies, m->config->unmatched_policy, ret) >= 0)
                return;
        (void) rs_policy_preset("observe-only", ret);
        snprintf(ret->name, sizeof(ret->name), "observe-only");
}

int manager_resolve_policy(Manager *m, const char *policy_name, const char *guest_name, const char *uuid,
                           RsPolicy *ret) {
        if (policy_name && policy_by_name(&m->policies, policy_name, ret) >= 0)
                return 0;
        select_policy(m, guest_name, uuid, ret);
        return policy_name ? -ENOENT : 0;
}

/* ---- the state directory's lock ---- */

/* Takes the state directory's lock (state-lock.h) into *fd, closing what *fd held. -EBUSY, logged,
 * when another rightsized holds it; another error is logged and the daemon goes on without the
 * lock, as it goes on without a state directory. */
static int manager_lock_state_dir(const char *dir, int *fd) {
        pid_t holder = 0;
        int lock_fd = -1;
        int r = state_lock_take(dir, &lock_fd, &holder);
        if (r == -EBUSY) {
                if (holder > 0)
                        log_error("Another rightsized (pid %ld) manages the guests of %s: it holds %s/%s. Refusing to "
                                  "run beside it: two daemons would fight over the same guests.",
                                  (long) holder, dir, dir, STATE_LOCK_FILE);
                else
                        log_error("Another rightsized manages the guests of %s: it holds %s/%s. Refusing to run "
                                  "beside it: two daemons would fight over the same guests.",
                                  dir, dir, STATE_LOCK_FILE);
                return r;
        }
        if (r < 0) {
                log_warning_errno(r, "Cannot lock %s/%s, so a second rightsized would not be kept out: %m", dir,
                                  STATE_LOCK_FILE);
                return r;
        }
        if (*fd >= 0)
                close(*fd);
        *fd = lock_fd;
        return 0;
}

/* ---- the state directory's upkeep ---- */

static bool state_file_in_use(const char *path, void *userdata) {
        Manager *m = userdata;

        for (size_t i = 0; i < m->n_guests + m->n_refused; i++) {
                const char *name = i < m->n_guests ? guest_name(m->guests[i]) : m->refused[i - m->n_guests].name;
                _cleanup_free_ char *mine = NULL;
                if (state_file_path(m->config->state_dir, name, &mine) < 0 || streq(mine, path))
                        return true; /* kept when in doubt */
        }
        return false;
}

static void manager_age_state_files(Manager *m) {
        if (!m->config->state_dir)
                return;
        int r = state_dir_age_out(m->config->state_dir, now_usec(CLOCK_REALTIME), m->config->state_remove_usec,
                                  state_file_in_use, m);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Cannot look for old state files in %s: %m", m->config->state_dir);
}

static int on_state_age_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        manager_age_state_files(userdata);
        (void) sd_event_source_set_time(s, usec + STATE_AGE_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

/* ---- host and arbitration ---- */

static void manager_read_host(Manager *m) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        if (m->host_read_usec && now < m->host_read_usec + HOST_READ_INTERVAL_USEC)
                return;
        if (host_memory_read("/proc", &m->host) < 0)
                log_debug("Cannot read the host's MemAvailable");
        m->host_read_usec = now;
}

static bool guest_arbitrated(const Guest *g) {
        return guest_phase(g) == GUEST_PHASE_RUNNING && guest_has_decision(g) && guest_actual(g) > 0;
}

/* What a guest brings to the arbitration. A paused guest stays where it is: what it holds on
 * the host, not just what it reports. */
static RsArbiterGuest arbiter_input(const Guest *g) {
        const RsEstimate *e = guest_estimate(g);
        bool paused = guest_is_paused(g);
        uint64_t actual = rs_arbiter_held(guest_actual(g), guest_host_rss(g));
        RsArbiterGuest in = {
                .want = paused ? actual : guest_want(g),
                .estimate = e ? e->estimate : RS_UNKNOWN,
                .floor = paused ? actual : guest_floor(g),
                .max = paused ? actual : guest_max(g),
                .shares = guest_policy(g)->shares,
                .mode = guest_policy(g)->mode,
        };
        in.floor = MIN(in.floor, in.max);
        return in;
}

static bool arbiter_input_equal(const RsArbiterGuest *a, const RsArbiterGuest *b) {
        return a->want == b->want && a->estimate == b->estimate && a->floor == b->floor && a->max == b->max &&
               a->shares == b->shares && a->mode == b->mode;
}

/* Every guest's cycle asks for its share, and a share depends on every guest: computed for
 * each ask, that is O(n²) per interval. So one computation serves every guest and is kept
 * here (m->shares) until an input can have changed:
 *   - a new host reading (at most every HOST_READ_INTERVAL_USEC): MemAvailable, and with it
 *     what the guests hold (their actual sizes, summed at the same moment);
 *   - the asking guest's own inputs (want, estimate, floor, max, shares, mode): its core
 *     just decided and it is about to act on its share. Since every guest asks right after
 *     its own decision, a change of any guest's wish recomputes everybody's share at once;
 *   - guests coming, going, or changing policy (manager_arbitration_invalidate()).
 * What changes outside a guest's cycle (a balloon moving, a pause, a connection lost) is
 * taken in at the next host reading, as MemAvailable always was. The shares are those a
 * computation for every ask would give, with at most that delay. */
static void manager_arbitration_invalidate(Manager *m) {
        for (size_t i = 0; i < m->n_guests; i++)
                m->shares[i].stamp = 0;
}

/* The guest's cached share (m->shares runs parallel to m->guests). */
static ManagerShare *manager_share(Manager *m, const Guest *g) {
        for (size_t i = 0; i < m->n_guests; i++)
                if (m->guests[i] == g)
                        return &m->shares[i];
        return NULL;
}

/* Without arbitration every guest gets its own wish, whatever the host has left: an operator
 * must hear of it (once, and when it works again), not find it out from an OOM killer. */
static void manager_arbitration_failed(Manager *m, int error) {
        if (!m->arbitration_failed)
                log_warning_errno(error, "Cannot arbitrate between the %zu guests (%m): each gets its own wish "
                                         "until arbitration works again", m->n_guests);
        m->arbitration_failed = true;
}

static void manager_arbitrate_all(Manager *m) {
        _cleanup_free_ RsArbiterGuest *in = NULL;
        _cleanup_free_ uint64_t *out = NULL;
        _cleanup_free_ size_t *who = NULL;
        _cleanup_free_ uint64_t *reported = NULL, *rss = NULL;
        size_t n = 0;

        manager_arbitration_invalidate(m);
        in = calloc(m->n_guests, sizeof(*in));
        out = calloc(m->n_guests, sizeof(*out));
        who = calloc(m->n_guests, sizeof(*who));
        reported = calloc(m->n_guests, sizeof(*reported));
        rss = calloc(m->n_guests, sizeof(*rss));
        if (!in || !out || !who || !reported || !rss) {
                manager_arbitration_failed(m, -ENOMEM);
                return;
        }

        for (size_t i = 0; i < m->n_guests; i++) {
                Guest *g = m->guests[i];
                if (!guest_arbitrated(g))
                        continue;
                in[n] = arbiter_input(g);
                reported[n] = guest_actual(g);
                rss[n] = guest_host_rss(g);
                who[n++] = i;
        }

        RsArbiterHost host = {
                .guest_memory = rs_arbiter_guest_memory(m->host.mem_available, reported, rss, n),
                .reserve = size_spec_resolve(&m->config->host_reserve,
                                             m->host.mem_total != UINT64_MAX ? m->host.mem_total : 0),
        };
        int r = rs_arbitrate(&host, in, n, out);
        if (r < 0 && r != -ENOSPC) {
                manager_arbitration_failed(m, r);
                return;
        }
        if (m->arbitration_failed)
                log_info("Arbitration between the guests works again");
        m->arbitration_failed = false;
        for (size_t i = 0; i < n; i++) {
                assert(who[i] < m->n_guests);
                m->shares[who[i]] = (ManagerShare) {
                        .in = in[i],
                        .arbitrated = out[i],
                        .short_of_memory = r != RS_ARBITER_FITS,
                        .stamp = m->host_read_usec,
                };
        }
}

static uint64_t manager_arbitrate(Guest *self, void *userdata) {
        Manager *m = userdata;

        manager_read_host(m);
        if (m->host.mem_available == UINT64_MAX || !guest_arbitrated(self))
                return guest_want(self); /* nothing to arbitrate with, or not taking part */

        RsArbiterGuest mine = arbiter_input(self);
        ManagerShare *share = manager_share(m, self);
        if (!share)
                return guest_want(self);
        bool cached = m->host_read_usec != 0 && share->stamp == m->host_read_usec &&
                      arbiter_input_equal(&share->in, &mine);
        if (!cached)
                manager_arbitrate_all(m);
        if (m->host_read_usec == 0 || share->stamp != m->host_read_usec)
                return guest_want(self); /* the computation failed */

        uint64_t result = share->arbitrated;
        if (share->short_of_memory && result != guest_want(self))
                log_guest_debug(self, "Host short of memory: arbitration gives %" PRIu64
                                " instead of %" PRIu64, result, guest_want(self));
        return result;
}

/* ---- publishing ---- */

uint64_t manager_reclaimed(const Manager *m) {
        uint64_t sum = 0;
        for (size_t i = 0; i < m->n_guests; i++) {
                uint64_t r = guest_reclaimed(m->guests[i]);
                if (r != UINT64_MAX)
                        sum += r;
        }
        return sum;
}

unsigned manager_guests_managed(const Manager *m) {
        unsigned n = 0;
        for (size_t i = 0; i < m->n_guests; i++)
                n += guest_phase(m->guests[i]) == GUEST_PHASE_RUNNING;
        return n;
}

static void manager_write_metrics(Manager *m) {
        _cleanup_free_ MetricsGuest *mg = NULL;
        int r;

        if (!m->config->metrics_path)
                return;
        mg = calloc(MAX(m->n_guests, (size_t) 1), sizeof(*mg));
        if (!mg) {
                log_oom();
                return;
        }
        /* A few small files in /proc and /sys, once per write (every PUBLISH_INTERVAL_USEC at most). */
        MemoryReportHost mh;
        memory_report_host_read("/proc", "/sys", &mh);
        for (size_t i = 0; i < m->n_guests; i++) {
                const Guest *g = m->guests[i];
                const RsEstimate *e = guest_estimate(g);
                MemLedger ml;
                memory_report_guest(g, mh.thp_refills, &ml);
                const GuestCounters *c = guest_counters(g);
                const RsPolicy *p = guest_policy(g);
                bool refaults_known = c->refaults_anon.known || c->refaults_file.known;
                mg[i] = (MetricsGuest) {
                        .name = guest_name(g),
                        /* A libvirt guest is named after its domain. */
                        .domain = guest_source(g) == GUEST_SOURCE_LIBVIRT ? guest_name(g) : NULL,
                        .state = guest_state_string(g),
                        .uuid = guest_uuid(g),
                        .source = guest_source_string(guest_source(g)),
                        .policy = p->name,
                        .mode = rs_mode_to_string(p->mode),
                        .estimate_bytes = e ? e->estimate : METRICS_UNKNOWN,
                        .estimate_lower_bytes = e ? e->lower : METRICS_UNKNOWN,
                        .estimate_upper_bytes = e ? e->upper : METRICS_UNKNOWN,
                        .target_bytes = guest_target(g) ?: METRICS_UNKNOWN,
                        .actual_bytes = guest_actual(g) ?: METRICS_UNKNOWN,
                        .host_rss_bytes = guest_host_rss(g),
                        .max_bytes = guest_max(g) ?: METRICS_UNKNOWN,
                        /* guest_max() is 0 only while the guest's size is unknown: so is the floor. */
                        .floor_bytes = guest_max(g) ? guest_floor(g) : METRICS_UNKNOWN,
                        .reclaimable_bytes = guest_reclaimable(g),
                        .boot_bytes = guest_boot_memory(g) ?: METRICS_UNKNOWN,
                        .recommended_boot_bytes = METRICS_UNKNOWN,
                        .recommended_floor_bytes = METRICS_UNKNOWN,
                        .recommended_max_bytes = METRICS_UNKNOWN,
                        .recommendation_points = METRICS_UNKNOWN,
                        .ledger_known = true,
                        .host_swap_bytes = ml.swap,
                        .host_ksm_bytes = ml.ksm,
                        .reported_used_bytes = ml.used,
                        .reported_cache_bytes = ml.cache,
                        .reported_free_bytes = ml.free,
                        .balloon_bytes = ml.balloon,
                        .free_returned_bytes = ml.reported,
                        .unreturned_bytes = ml.unreturned,
                        .refilled_bytes = ml.refilled,
                        .unreturned_why = ml.flags,
                        .refault_rate = guest_refault_rate(g),
                        .major_fault_rate = guest_major_fault_rate(g),
                        .refaults_total = refaults_known
                                                  ? metrics_counter_add(c->refaults_anon.total, c->refaults_file.total)
                                                  : METRICS_UNKNOWN,
                        .major_faults_total = c->major_faults.known ? c->major_faults.total : METRICS_UNKNOWN,
                        .oom_kills_total = c->oom_kills.known ? c->oom_kills.total : METRICS_UNKNOWN,
                        .probe_cycles_total = c->probe_cycles,
                        .reprobes_skipped_total = guest_reprobes_skipped(g),
                        .probe_refaults_total = refaults_known ? c->probe_refaults : METRICS_UNKNOWN,
                        .faults_total = c->faults,
                        .hugepages_collapsed_total = c->hugepages_collapsed,
                        .hugepage_holes_filled_bytes_total = c->hugepage_holes_filled,
                        .resizes_total = {
                                [METRICS_ACTUATOR_BALLOON] = c->resizes[GUEST_ACTUATOR_BALLOON],
                                [METRICS_ACTUATOR_VIRTIO_MEM] = c->resizes[GUEST_ACTUATOR_VIRTIO_MEM],
                                [METRICS_ACTUATOR_DIMM] = c->resizes[GUEST_ACTUATOR_DIMM],
                        },
                        .resize_failures_total = {
                                [METRICS_ACTUATOR_BALLOON] = c->actuator_failures[GUEST_ACTUATOR_BALLOON],
                                [METRICS_ACTUATOR_VIRTIO_MEM] = c->actuator_failures[GUEST_ACTUATOR_VIRTIO_MEM],
                                [METRICS_ACTUATOR_DIMM] = c->actuator_failures[GUEST_ACTUATOR_DIMM],
                        },
                };
                /* The boot size now is the running guest's (no libvirt call per write: a
                 * definition's currentMemory is what `rightsizectl recommend` reads). */
                BootRecommendation rec;
                if (guest_boot_recommendation(g, &rec) >= 0) {
                        mg[i].recommendation_points = rec.points;
                        if (rec.points > 0) {
                                mg[i].recommended_boot_bytes = rec.boot;
                                mg[i].recommended_floor_bytes = rec.floor;
                                mg[i].recommended_max_bytes = rec.max;
                        }
                }
        }
        const char *states[16];
        MetricsHost host = { .reclaimed_bytes = manager_reclaimed(m), .guests_managed = manager_guests_managed(m),
                             .version = RIGHTSIZE_VERSION, .states = states,
                             .n_states = guest_all_state_names(states, ARRAY_SIZE(states)),
                             .ksm_known = mh.ksm.run >= 0, .ksm_sharing_bytes = mh.ksm.pages_sharing,
                             .ksm_shared_bytes = mh.ksm.pages_shared,
                             .thp_known = mh.thp.mode != HOST_THP_UNKNOWN, .thp_refills = mh.thp_refills };
        r = metrics_write_file(m->config->metrics_path, mg, m->n_guests, &host);
        if (r < 0)
                log_warning_errno(r, "Failed to write the metrics file %s: %m", m->config->metrics_path);
}

static void manager_publish(Manager *m, bool force) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        if (!force && m->metrics_written_usec && now < m->metrics_written_usec + PUBLISH_INTERVAL_USEC)
                return;
        m->metrics_written_usec = now;
        manager_write_metrics(m);

        unsigned n = manager_guests_managed(m);
        uint64_t reclaimed = manager_reclaimed(m);
        if (force || n != m->status_guests || reclaimed != m->status_reclaimed) {
                (void) notify_status(n, reclaimed, manager_api_error(m));
                m->status_guests = n;
                m->status_reclaimed = reclaimed;
        }
}

const char *manager_api_error(const Manager *m) {
        return m->bus_error[0] ? m->bus_error : NULL;
}

void manager_api_changed(Manager *m) {
        manager_publish(m, true);
}

static void manager_guest_updated(Guest *g, bool estimate_changed, void *userdata) {
        Manager *m = userdata;
        if (estimate_changed)
                manager_bus_emit_estimate_changed(m, g);
        manager_publish(m, false);
}

static const HostMemory *manager_host_memory(Guest *g _unused_, void *userdata) {
        Manager *m = userdata;
        manager_read_host(m);
        return &m->host;
}

static const GuestHooks guest_hooks = {
        .host_memory = manager_host_memory,
        .arbitrate = manager_arbitrate,
        .updated = manager_guest_updated,
};

/* ---- guests ---- */

/* A guest in the operator's words: where it comes from. */
static char *guest_where(const Guest *g) {
        char *s = NULL;
        return asprintf(&s, "%s %s", guest_source_origin_kind(guest_source(g)), guest_origin(g)) < 0 ? NULL : s;
}

static void refused_guest_done(RefusedGuest *r) {
        free(r->name);
        free(r->origin);
        free(r->where);
        free(r->owner_where);
        *r = (RefusedGuest) {};
}

/* Origins do not collide across sources: a socket's path begins with '/', a UUID never does. */
static ssize_t manager_find_refused(const Manager *m, const char *origin) {
        for (size_t i = 0; i < m->n_refused; i++)
                if (streq(origin, m->refused[i].origin))
                        return (ssize_t) i;
        return -1;
}

static void manager_drop_refused(Manager *m, size_t i) {
        refused_guest_done(&m->refused[i]);
        memmove(m->refused + i, m->refused + i + 1, (m->n_refused - i - 1) * sizeof(RefusedGuest));
        m->n_refused--;
}

/* Another guest has g's name: g would share its state file (one per name), its metrics series
 * and its D-Bus record, and the two would overwrite each other's state. g is turned away, said
 * once however often its source reports it again. */
static int manager_refuse_guest(Manager *m, Guest *g, const Guest *owner) {
        if (manager_find_refused(m, guest_origin(g)) >= 0)
                return -EEXIST;
        RefusedGuest *array = realloc(m->refused, (m->n_refused + 1) * sizeof(RefusedGuest));
        if (!array)
                return log_oom();
        m->refused = array;
        RefusedGuest r = {
                .name = strdup(guest_name(g)),
                .source = guest_source(g),
                .origin = strdup(guest_origin(g)),
                .where = guest_where(g),
                .owner_where = guest_where(owner),
        };
        if (!r.name || !r.origin || !r.where || !r.owner_where) {
                refused_guest_done(&r);
                return log_oom();
        }
        m->refused[m->n_refused++] = r;
        log_named_guest_error(r.name, "refused",
                              "Refusing %s: %s already has the name %s, and two guests of one name would share a "
                              "state file, metrics and a D-Bus record. Rename one of them; this one is taken on "
                              "once the name is free",
                              r.where, r.owner_where, r.name);
        return -EEXIST;
}

int manager_add_guest(Manager *m, Guest *g) {
        const Guest *owner = manager_find_guest(m, guest_name(g));
        if (owner)
                return manager_refuse_guest(m, g, owner);
        Guest **array = realloc(m->guests, (m->n_guests + 1) * sizeof(Guest *));
        if (!array)
                return -ENOMEM;
        m->guests = array;
        ManagerShare *shares = realloc(m->shares, (m->n_guests + 1) * sizeof(ManagerShare));
        if (!shares)
                return -ENOMEM;
        m->shares = shares;
        m->shares[m->n_guests] = (ManagerShare) {};
        m->guests[m->n_guests++] = g;
        guest_set_state_stale_usec(g, m->config->state_stale_usec);
        return 0;
}

static int on_take_on_refused(sd_event_source *s, void *userdata);

static void manager_remove_guest(Manager *m, Guest *g) {
        for (size_t i = 0; i < m->n_guests; i++)
                if (m->guests[i] == g) {
                        memmove(m->guests + i, m->guests + i + 1, (m->n_guests - i - 1) * sizeof(Guest *));
                        memmove(m->shares + i, m->shares + i + 1, (m->n_guests - i - 1) * sizeof(ManagerShare));
                        m->n_guests--;
                        break;
                }
        (void) guest_save_state(g);
        guest_free(g);
        manager_arbitration_invalidate(m); /* its memory is free for the others */
        manager_publish(m, true);
        /* Its name may free a refused guest's: taken on from the loop, not from inside the
         * driver that is removing this one (a libvirt driver being freed, discovery's callback). */
        if (m->n_refused > 0 && !m->stopping) {
                if (m->take_on_refused)
                        (void) sd_event_source_set_enabled(m->take_on_refused, SD_EVENT_ONESHOT);
                else
                        (void) sd_event_add_defer(m->event, &m->take_on_refused, on_take_on_refused, m);
        }
}

bool manager_has_libvirt(const Manager *m) {
        return m->sources[GUEST_SOURCE_LIBVIRT] != NULL;
}

int manager_set_domain_policy(Manager *m, const char *domain, const char *policy_name) {
        const GuestSourceOps *ops = guest_sources[GUEST_SOURCE_LIBVIRT];
        if (!m->sources[GUEST_SOURCE_LIBVIRT] || !ops->set_kept_policy)
                return -ENOTCONN;
        return ops->set_kept_policy(m->sources[GUEST_SOURCE_LIBVIRT], domain, policy_name);
}

/* The guest's source, when it keeps a persistent definition: its UUID (a libvirt domain's) or
 * name finds it there. */
static const GuestSourceOps *boot_size_source(Manager *m, Guest *g, void **ret_source, const char **ret_key) {
        GuestSource s = guest_source(g);
        const GuestSourceOps *ops = guest_sources[s];
        if (!m->sources[s] || !ops->get_boot_size || !ops->set_boot_size)
                return NULL;
        *ret_source = m->sources[s];
        *ret_key = guest_uuid(g) ?: guest_name(g);
        return ops;
}

int manager_get_boot_size(Manager *m, Guest *g, uint64_t *ret_current, uint64_t *ret_memory) {
        const char *key;
        void *source;
        const GuestSourceOps *ops = boot_size_source(m, g, &source, &key);
        return ops ? ops->get_boot_size(source, key, ret_current, ret_memory) : -EOPNOTSUPP;
}

int manager_set_boot_size(Manager *m, Guest *g, uint64_t bytes) {
        const char *key;
        void *source;
        const GuestSourceOps *ops = boot_size_source(m, g, &source, &key);
        return ops ? ops->set_boot_size(source, key, bytes) : -EOPNOTSUPP;
}

/* ---- the guest sources' view of the manager (guest-source.h): they edit nothing here ---- */

static int source_resolve_policy(void *userdata, const char *policy_name, const char *name, const char *uuid,
                                 RsPolicy *ret) {
        return manager_resolve_policy(userdata, policy_name, name, uuid, ret);
}

static int source_add_guest(void *userdata, Guest *g) {
        return manager_add_guest(userdata, g);
}

static void source_remove_guest(void *userdata, Guest *g) {
        manager_remove_guest(userdata, g);
}

static void source_refused_gone(void *userdata, const char *origin) {
        Manager *m = userdata;
        ssize_t i = manager_find_refused(m, origin);
        if (i >= 0)
                manager_drop_refused(m, (size_t) i);
}

static bool source_stopping(void *userdata) {
        const Manager *m = userdata;
        return m->stopping;
}

static const GuestSourceOwner source_owner = {
        .guest_hooks = &guest_hooks,
        .resolve_policy = source_resolve_policy,
        .add_guest = source_add_guest,
        .remove_guest = source_remove_guest,
        .refused_gone = source_refused_gone,
        .stopping = source_stopping,
};

/* ---- guests by name ---- */

Guest *manager_find_guest(Manager *m, const char *name) {
        for (size_t i = 0; i < m->n_guests; i++)
                if (streq(guest_name(m->guests[i]), name))
                        return m->guests[i];
        return NULL;
}

/* Each refused guest whose name is free now is taken on, the oldest refusal first; one that
 * cannot be (its socket or domain went meanwhile) lets the next of its name try. */
static int on_take_on_refused(sd_event_source *s _unused_, void *userdata) {
        Manager *m = userdata;

        for (size_t i = 0; i < m->n_refused && !m->stopping;) {
                if (manager_find_guest(m, m->refused[i].name)) {
                        i++;
                        continue;
                }
                RefusedGuest r = m->refused[i];
                memmove(m->refused + i, m->refused + i + 1, (m->n_refused - i - 1) * sizeof(RefusedGuest));
                m->n_refused--;
                log_named_guest_info(r.name, "connecting", "The name is free: taking on %s", r.where);
                if (m->sources[r.source])
                        guest_sources[r.source]->retry(m->sources[r.source], r.origin, r.name);
                refused_guest_done(&r);
                /* The list may have changed under the calls: start over (each pass takes one off). */
                i = 0;
        }
        return 0;
}

/* ---- life cycle ---- */

int manager_new(sd_event *event, const char *config_path, Config *config, Manager **ret) {
        Manager *m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->config_path = strdup(config_path);
        if (!m->config_path) {
                free(m);
                return -ENOMEM;
        }
        m->event = sd_event_ref(event);
        m->config = config;
        m->host = (HostMemory) { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };
        m->state_lock_fd = -1;
        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        manager_bus_close(m);
        /* The last registered first: libvirt's go with their source, the QMP guests below. */
        for (size_t s = _GUEST_SOURCE_MAX; s-- > 0;)
                if (m->sources[s]) {
                        guest_sources[s]->free(m->sources[s]);
                        m->sources[s] = NULL;
                }
        for (size_t i = 0; i < m->n_guests; i++)
                guest_free(m->guests[i]);
        free(m->guests);
        free(m->shares);
        for (size_t i = 0; i < m->n_refused; i++)
                refused_guest_done(&m->refused[i]);
        free(m->refused);
        sd_event_source_disable_unref(m->take_on_refused);
        sd_event_source_disable_unref(m->state_age_timer);
        group_cache_clear(&m->read_group_cache);
        rs_policy_set_clear(&m->policies);
        config_free(m->config);
        sd_event_source_disable_unref(m->shutdown_timer);
        sd_event_unref(m->event);
        if (m->state_lock_fd >= 0)
                close(m->state_lock_fd);
        free(m->config_path);
        free(m);
        return NULL;
}

/* What the balloons return, the host's khugepaged may allocate again (daemon/host-thp.h): said
 * once at start, as the setting is the host's, not ours. */
static void warn_khugepaged_refill(void) {
        HostThp thp;

        if (host_thp_read("/sys", &thp) < 0 || !host_thp_refills_balloon(&thp))
                return;
        log_warning("khugepaged fills ballooned guest memory back in: transparent huge pages are on (%s) and "
                    "khugepaged/max_ptes_none is %d, so a 2 MiB range of guest RAM that keeps a resident page is "
                    "collapsed whole and the pages the balloon returned are allocated again. "
                    "echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none keeps them "
                    "(rightsized(8), HOST SETTINGS)",
                    host_thp_mode_to_string(thp.mode), thp.max_ptes_none);
}

int manager_start(Manager *m) {
        _cleanup_free_ char *error = NULL;
        int r;

        log_set_max_level(m->config->log_level);
        r = manager_load_policies(m->config->policy_dir, &m->policies, &error);
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "%s", error ?: "cannot load the policies");
        if (r == -ENOENT)
                log_warning("Policy directory %s does not exist: every guest gets unmatched-policy = %s",
                            m->config->policy_dir, m->config->unmatched_policy);
        if (r > 0)
                return log_error_errno(EINVAL, "Refusing to start with an invalid policy: %s", error ?: "?");
        free(error);
        error = NULL;
        r = manager_check_unmatched_policy(&m->policies, m->config, &error);
        if (r < 0)
                return log_error_errno(r, "Refusing to start: %s", error ?: "?");

        if (m->config->state_dir) {
                r = mkdir_p_simple(m->config->state_dir);
                if (r < 0)
                        log_warning_errno(r, "Cannot create the state directory %s: %m", m->config->state_dir);
                r = manager_lock_state_dir(m->config->state_dir, &m->state_lock_fd);
                if (r == -EBUSY)
                        return r;
                /* Ours alone now, and nothing is being saved yet. */
                (void) state_dir_remove_leftovers(m->config->state_dir);
                r = sd_event_add_time_relative(m->event, &m->state_age_timer, CLOCK_MONOTONIC, STATE_AGE_FIRST_USEC,
                                               0, on_state_age_timer, m);
                if (r < 0)
                        log_warning_errno(r, "Cannot schedule the removal of old state files: %m");
        }

        /* Without the bus the guests are still managed: a failure is logged, shown in STATUS= and
         * retried (manager-bus.c). Another process owning the name is another rightsized: two
         * would fight over the same guests. */
        r = manager_bus_open(m);
        if (r == -EEXIST)
                return r;

        for (size_t s = 0; s < _GUEST_SOURCE_MAX; s++) {
                r = guest_sources[s]->new(m->event, m->config, &source_owner, m, &m->sources[s]);
                if (r < 0)
                        return r; /* logged */
        }

        m->started = true;
        (void) notify_watchdog_setup(m->event);
        (void) notify_ready(manager_guests_managed(m), manager_reclaimed(m), manager_api_error(m));
        log_info("rightsized running: %zu policies, %zu guests found", m->policies.n, m->n_guests);
        warn_khugepaged_refill();
        return 0;
}

int manager_reload(Manager *m, char **ret_error) {
        _cleanup_(config_freep) Config *config = NULL;
        _cleanup_free_ char *error = NULL;
        RsPolicySet set = {};
        int r;

        (void) notify_reloading();
        r = config_load(m->config_path, m->config_optional, &config, &error);
        if (r < 0) {
                log_error("Reload failed, keeping the running configuration: %s", error ?: strerror(-r));
                goto fail;
        }
        r = manager_load_policies(config->policy_dir, &set, &error);
        if (r == -ENOENT)
                r = 0;
        else if (r > 0)
                r = -EINVAL;
        if (r >= 0) {
                free(error);
                error = NULL;
                r = manager_check_unmatched_policy(&set, config, &error);
        }
        if (r < 0) {
                rs_policy_set_clear(&set);
                log_error("Reload failed, keeping the running configuration and policies: %s",
                          error ?: strerror(-r));
                goto fail;
        }

        if (!streq(config->state_dir, m->config->state_dir)) {
                (void) mkdir_p_simple(config->state_dir);
                if (manager_lock_state_dir(config->state_dir, &m->state_lock_fd) == -EBUSY) {
                        rs_policy_set_clear(&set);
                        r = -EBUSY;
                        free(error);
                        if (asprintf(&error, "state-dir = %s belongs to another rightsized", config->state_dir) < 0)
                                error = NULL;
                        log_error("Reload failed, keeping the running configuration: %s", error ?: strerror(-r));
                        goto fail;
                }
                (void) state_dir_remove_leftovers(config->state_dir);
        }
        rs_policy_set_clear(&m->policies);
        m->policies = set;
        Config *old = m->config;
        m->config = TAKE_PTR(config);
        config_free(old);
        log_set_max_level(m->config->log_level);
        group_cache_clear(&m->read_group_cache); /* read-group may name another group, or one just created */

        for (size_t i = 0; i < m->n_guests; i++)
                guest_set_state_stale_usec(m->guests[i], m->config->state_stale_usec);
        /* Each source selects its guests' policies again and follows its new settings. */
        for (size_t s = 0; s < _GUEST_SOURCE_MAX; s++)
                guest_sources[s]->reload(&m->sources[s], m->event, m->config, &source_owner, m);
        manager_arbitration_invalidate(m); /* new floors, maxima, shares, host reserve */
        manager_age_state_files(m);        /* with state-remove-after as it is now */
        /* An operator who just installed the bus policy need not wait for the next retry. */
        manager_bus_retry_now(m);
        log_info("Reloaded %s: %zu policies", m->config_path, m->policies.n);
        (void) notify_ready(manager_guests_managed(m), manager_reclaimed(m), manager_api_error(m));
        return 0;

fail:
        (void) notify_ready(manager_guests_managed(m), manager_reclaimed(m), manager_api_error(m));
        if (ret_error)
                *ret_error = TAKE_PTR(error);
        return r;
}

int manager_set_guest_policy(Manager *m, Guest *g, const char *policy_name) {
        RsPolicy p;

        manager_arbitration_invalidate(m); /* its floor, max and shares count for the others */
        if (policy_by_name(&m->policies, policy_name, &p) < 0)
                return -ENOENT;
        return guest_set_policy(g, &p);
}

static void manager_shutdown_finish(Manager *m) {
        for (size_t i = 0; i < m->n_guests; i++)
                (void) guest_save_state(m->guests[i]);
        manager_publish(m, true);
        if (m->config->metrics_path) {
                int r = metrics_remove_file(m->config->metrics_path);
                if (r < 0)
                        log_warning_errno(r, "Failed to remove the metrics file %s: %m", m->config->metrics_path);
        }
        (void) sd_event_exit(m->event, m->exit_error);
}

static void on_guest_shutdown_done(Guest *g _unused_, void *userdata) {
        Manager *m = userdata;
        if (m->shutdown_pending > 0 && --m->shutdown_pending == 0)
                manager_shutdown_finish(m);
}

static int on_shutdown_timeout(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Manager *m = userdata;
        log_warning("%u guests did not confirm their shutdown size in time", m->shutdown_pending);
        m->shutdown_pending = 0;
        manager_shutdown_finish(m);
        return 0;
}

void manager_shutdown(Manager *m) {
        if (m->stopping)
                return;
        m->stopping = true;
        (void) notify_stopping();
        log_info("Stopping: leaving guests at shutdown-action=%s", shutdown_action_to_string(m->config->shutdown_action));

        for (size_t i = 0; i < m->n_guests; i++) {
                Guest *g = m->guests[i];
                /* No more ticks: nothing may move the guest after its shutdown size was set. */
                guest_stop(g);
                if (guest_shutdown(g, m->config->shutdown_action, on_guest_shutdown_done, m) > 0)
                        m->shutdown_pending++;
        }
        if (m->shutdown_pending == 0) {
                manager_shutdown_finish(m);
                return;
        }
        uint64_t now;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        (void) sd_event_add_time(m->event, &m->shutdown_timer, CLOCK_MONOTONIC, now + SHUTDOWN_TIMEOUT_USEC, 0,
                                 on_shutdown_timeout, m);
}
