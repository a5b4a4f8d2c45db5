/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-qemu's own header, for its files and no one else: the guests, their connections and the
 * agent's open files, the fault kinds, and what each file lends the others. fake-qemu.c is the
 * process (options, sockets, connections, the model's clock), fake-qmp.c answers QMP (and
 * misbehaves as a fault says), fake-agent.c answers the guest agent, fake-windows.c what a
 * Windows guest answers differently. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "policies/rs-value.h"
#include "tests/model/guest-model.h"

#define VIRTIO_MEM_BLOCK (2 * MIB)
#define AGENT_MAX_FILES 32
#define STATS_EPOCH 1700000000ULL /* guest clock at model time 0 */

typedef enum FaultKind {
        FAULT_NONE,
        FAULT_GARBAGE,
        FAULT_HUGE_REPLY,
        FAULT_HANG,
        FAULT_CLOSE_MID_REPLY,
        FAULT_LYING_STATS,
        FAULT_STUCK_BALLOON,
        FAULT_DEEP_NESTING,
        FAULT_CONTAINER_FLOOD,
        FAULT_WRONG_TYPES,
        FAULT_EVENT_FLOOD,
        FAULT_LIE_FREE,
        FAULT_LIE_BACKWARDS,
        FAULT_LIE_HUGE,
        FAULT_LIE_FUTURE,
        FAULT_STALE_STATS,
        FAULT_AGENT_HANG,
        FAULT_AGENT_HUGE_VMSTAT,
        FAULT_AGENT_GARBAGE,
        FAULT_AGENT_UTF8_ERROR,
        FAULT_OUTSIDE_BALLOON,
        FAULT_OUTSIDE_RAISE,
        FAULT_NO_BALLOON,
        _FAULT_MAX,
} FaultKind;

typedef struct Guest Guest;

/* An open guest-file-open handle: the text as it was when opened, or (junk_lines > 0) that
 * many generated lines in front of it. */
typedef struct AgentFile {
        int64_t handle; /* 0: free slot */
        char *text;
        size_t text_len;
        uint64_t junk_lines;
        uint64_t pos;
} AgentFile;

typedef struct Conn {
        Guest *guest;
        int fd;
        sd_event_source *io;
        json_tokener *tok;
        bool agent;            /* a guest agent connection, not QMP */
        bool negotiated;
        bool close_after_flush;
        char *out;
        size_t out_len, out_size;
        uint64_t pad_left;     /* huge-reply bytes still to generate, then pad_suffix */
        char *pad_suffix;
        struct Conn *next;
} Conn;

struct Guest {
        unsigned index;
        char *path;
        int listen_fd;
        sd_event_source *accept_io;
        GuestModel model;
        FaultKind fault;
        bool windows;              /* answers as virtio-win's balloon and qemu-ga for Windows do */
        uint64_t fault_after_usec; /* CLOCK_MONOTONIC since start */
        bool fault_on_signal;      /* the fault waits for SIGUSR2 */
        uint64_t polling_interval; /* seconds, 0 = off */
        uint64_t stats_updated_usec; /* model time of the last stats refresh; 0 = never */
        bool have_stats;
        RsSample stats;
        uint64_t last_actual;
        bool outside_done;         /* outside-balloon: the other controller's change was made */
        uint64_t vm_requested, vm_size, vm_max;
        uint64_t n_commands, n_stats_reads, n_balloon_sets; /* for --counters */
        Conn *conns;
        /* the guest agent, when it has one */
        char *agent_path;
        int agent_listen_fd;
        sd_event_source *agent_accept_io;
        AgentFile files[AGENT_MAX_FILES];
        int64_t next_handle;
};

/* fake-qemu.c: the process and its connections */
extern uint64_t huge_reply_size;
/* The guest's fault, once its start time (or signal) has come. */
FaultKind guest_fault(const Guest *g);
/* Model time of the guest's last stats report (QEMU's last-update): every polling interval. */
uint64_t guest_stats_reported_usec(const Guest *g);
int conn_update_events(Conn *c);
/* Appends to c's output, written as the socket drains. */
int conn_queue(Conn *c, const char *data, size_t len);

/* fake-qmp.c: QMP's commands, replies and events */
json_object *error_reply(const char *class, const char *desc);
json_object *return_reply(json_object *value);
void broadcast_balloon_change(Guest *g);
/* Events a client must read and can only ignore: true balloon sizes and unrelated ones. */
void conn_flood(Conn *c, unsigned n);
/* Answers one QMP message on c. Returns <0 to drop the connection now. */
int conn_handle(Conn *c, json_object *msg);

/* fake-windows.c: a Windows guest's balloon stats, and its agent's answers (NULL: answered as
 * fake-agent.c does) */
json_object *windows_guest_stats_json(Guest *g);
json_object *windows_agent_execute(Guest *g, const char *cmd, json_object *args);

/* fake-agent.c: the guest agent */
void agent_file_close(AgentFile *f);
/* Answers one agent message on c. Returns <0 to drop the connection now. */
int agent_conn_handle(Conn *c, json_object *msg);
