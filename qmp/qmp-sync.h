/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Blocking conveniences for the operator tool and integration tests: each call runs the
 * client's sd-event loop until its operation completes, so other sources on the loop
 * keep running meanwhile. Never call these from a callback of that same loop (sd-event
 * does not nest; you would get -EBUSY). The daemon uses the asynchronous API instead.
 *
 * Every function returns 0 or a negative errno (the reply's error for failed commands).
 * ret_error, where offered, may be NULL; else it receives a malloc'd description of the
 * failure (free() it), or NULL on success. */
#pragma once

#include "qmp/qga-commands.h"
#include "qmp/qmp-client.h"
#include "qmp/qmp-commands.h"
#include "qmp/qmp-events.h"

/* 0 once ready; the disconnect error (e.g. -ECONNREFUSED, -ETIMEDOUT) otherwise. */
int qmp_sync_wait_ready(QmpClient *c, uint64_t timeout_usec);
/* *ret_result gets a reference to the "return" value (json_object_put() it). */
int qmp_sync_execute(QmpClient *c,
                     const char *command,
                     json_object *arguments,
                     uint64_t timeout_usec,
                     json_object **ret_result,
                     char **ret_error);

int qmp_sync_query_balloon(QmpClient *c, uint64_t timeout_usec, QmpBalloonInfo *ret, char **ret_error);
int qmp_sync_balloon_set_target(QmpClient *c, uint64_t target_bytes, uint64_t timeout_usec, char **ret_error);
int qmp_sync_set_stats_polling_interval(QmpClient *c, const char *qom_path, unsigned seconds, uint64_t timeout_usec, char **ret_error);
int qmp_sync_qom_get_u64(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec, uint64_t *ret,
                         char **ret_error);
int qmp_sync_qom_get_bool(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec, bool *ret,
                          char **ret_error);
int qmp_sync_get_guest_stats(QmpClient *c, const char *qom_path, uint64_t timeout_usec, QmpGuestStats *ret, char **ret_error);
/* *ret must be released with qmp_memory_device_list_clear(). */
int qmp_sync_query_memory_devices(QmpClient *c, uint64_t timeout_usec, QmpMemoryDeviceList *ret, char **ret_error);
int qmp_sync_virtio_mem_set_requested_size(QmpClient *c, const char *id_or_path, uint64_t bytes, uint64_t timeout_usec, char **ret_error);

/* Polls guest-stats every poll_usec until last-update exceeds after_last_update (a fresh
 * report), for at most timeout_usec (-ETIMEDOUT; *ret then holds the last stats read). */
int qmp_sync_wait_guest_stats_update(QmpClient *c,
                                     const char *qom_path,
                                     uint64_t after_last_update,
                                     uint64_t poll_usec,
                                     uint64_t timeout_usec,
                                     QmpGuestStats *ret);

/* Polls query-balloon every poll_usec until actual is within tolerance bytes of
 * target_bytes; -ETIMEDOUT after timeout_usec. *ret_actual (may be NULL) gets the last
 * value read either way: a guest under pressure settles short of the target. */
int qmp_sync_wait_balloon(QmpClient *c,
                          uint64_t target_bytes,
                          uint64_t tolerance,
                          uint64_t poll_usec,
                          uint64_t timeout_usec,
                          uint64_t *ret_actual);
/* Polls query-memory-devices until the device with this id has size == bytes (virtio-mem
 * plug/unplug progress); -ENODEV if no such device, -ETIMEDOUT as above. */
int qmp_sync_wait_memory_device_size(QmpClient *c,
                                     const char *id,
                                     uint64_t bytes,
                                     uint64_t poll_usec,
                                     uint64_t timeout_usec,
                                     uint64_t *ret_size);

/* Runs the loop for usec, e.g. to let events arrive between polls. */
int qmp_sync_sleep(sd_event *event, uint64_t usec);

/* Captures events from the moment it is created, so an event that arrives while another
 * sync call runs the loop is not missed. It wraps the client's callbacks (forwarding
 * everything to the previous ones) until freed; free watches in reverse order of creation
 * and do not call qmp_client_set_callbacks() while one exists. name NULL captures all. */
typedef struct QmpEventWatch QmpEventWatch;
int qmp_event_watch_new(QmpClient *c, const char *name, QmpEventWatch **ret);
QmpEventWatch *qmp_event_watch_free(QmpEventWatch *w);
/* Pops the oldest captured event (whole message, json_object_put() it), running the loop
 * until one arrives: -ETIMEDOUT after timeout_usec, -ECONNRESET if the client closes. */
int qmp_event_watch_next(QmpEventWatch *w, uint64_t timeout_usec, json_object **ret_message);
size_t qmp_event_watch_count(const QmpEventWatch *w);

/* ---- guest agent ---- */

int qga_sync_wait_ready(QgaClient *c, uint64_t timeout_usec);
/* *ret_data is malloc'd and NUL-terminated. */
int qga_sync_read_file(QgaClient *c,
                       const char *path,
                       size_t max_size,
                       uint64_t timeout_usec,
                       char **ret_data,
                       size_t *ret_size,
                       char **ret_error);
int qga_sync_read_vmstat(QgaClient *c, uint64_t timeout_usec, GuestVmstat *ret, char **ret_error);
int qga_sync_read_meminfo(QgaClient *c, uint64_t timeout_usec, GuestMeminfo *ret, char **ret_error);
int qga_sync_read_psi_memory(QgaClient *c, uint64_t timeout_usec, GuestPsi *ret, char **ret_error);
int qga_sync_read_zoneinfo(QgaClient *c, uint64_t timeout_usec, GuestZoneinfo *ret, char **ret_error);
