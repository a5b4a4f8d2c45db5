/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A scripted QMP / guest agent peer for unit tests. It owns one end of a socketpair and
 * runs on the same sd-event loop as the client under test, working through a script of
 * steps in order: send bytes (whole, or split into chunks written one loop iteration
 * apart), wait, expect a command, close. Any deviation is recorded as a failure that the
 * test asserts on.
 *
 * Sent text may contain placeholders, replaced when the step runs:
 *   %ID%      the "id" of the most recently expected command, as JSON ("rs-3" with quotes)
 *   %ID:n%    the id of the n-th expected command (0-based, qmp_capabilities included)
 *   %SYNC%    the id argument of the last guest-sync-delimited seen (guest agent mode) */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct FakePeer FakePeer;

/* Takes ownership of fd. */
int fake_peer_new(FakePeer **ret, sd_event *event, int fd);
FakePeer *fake_peer_free(FakePeer *p);

/* Guest agent mode: 0xFF bytes from the client reset the peer's parser and are counted. */
void fake_peer_set_qga(FakePeer *p, bool qga);
/* Chunk size for send steps added from now on: 0 writes whole, 1 byte by byte. */
void fake_peer_set_chunk_size(FakePeer *p, size_t chunk);

void fake_peer_send(FakePeer *p, const char *text);
void fake_peer_send_bytes(FakePeer *p, const void *data, size_t size);
/* arguments_json NULL: arguments not checked; "{}"-style text: must be equal. */
void fake_peer_expect(FakePeer *p, const char *command, const char *arguments_json);
void fake_peer_delay(FakePeer *p, uint64_t usec);
void fake_peer_close(FakePeer *p);

/* Conveniences: greeting + qmp_capabilities handshake; {"return": JSON, "id": %ID%}. */
void fake_peer_greet(FakePeer *p);
void fake_peer_reply(FakePeer *p, const char *return_json);

bool fake_peer_done(const FakePeer *p);
const char *fake_peer_failure(const FakePeer *p); /* NULL while all is well */
size_t fake_peer_n_unexpected(const FakePeer *p); /* received but never expected */
unsigned fake_peer_n_sync_bytes(const FakePeer *p);
size_t fake_peer_n_chunks_written(const FakePeer *p);
bool fake_peer_client_closed(const FakePeer *p);
const char *fake_peer_last_id(const FakePeer *p);

/* Test loop helpers: run the loop until *flag / the peer's script is done / cond(userdata).
 * They give up after a generous guard time (a hang, not a timing assertion) and then
 * return false. */
bool test_run_until_flag(sd_event *e, const bool *flag);
bool test_run_until_done(sd_event *e, const FakePeer *p);
bool test_run_until(sd_event *e, bool (*cond)(void *userdata), void *userdata);
/* Runs the loop for usec (lets late messages arrive). */
void test_run_for(sd_event *e, uint64_t usec);
