/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/bus-caller.h"

#include <stdio.h>

#include "common/macro.h"

const char *bus_caller_describe(sd_bus_message *call, char *buf, size_t size) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        char uid_text[16] = "?", pid_text[16] = "?";
        uid_t uid;
        pid_t pid;

        /* The bus already told it for the access check: sd-bus keeps it with the message. */
        if (sd_bus_query_sender_creds(call, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID | SD_BUS_CREDS_AUGMENT, &creds) >= 0) {
                if (sd_bus_creds_get_euid(creds, &uid) >= 0)
                        snprintf(uid_text, sizeof(uid_text), "%u", (unsigned) uid);
                if (sd_bus_creds_get_pid(creds, &pid) >= 0)
                        snprintf(pid_text, sizeof(pid_text), "%u", (unsigned) pid);
        }
        snprintf(buf, size, "uid %s, pid %s", uid_text, pid_text);
        return buf;
}
