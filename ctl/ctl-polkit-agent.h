/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A text polkit agent for the length of one change, systemd's (src/shared/polkit-agent.c) made
 * small: an administrator logged in over SSH has no graphical agent, and without one polkit's
 * auth_admin_keep cannot ask for the password, so the change would be refused. */
#pragma once

/* Starts pkttyagent(1), registered for this process (polkit finds it from the bus name
 * rightsized asks about: this process's connection), and waits until it has registered, at most
 * a few seconds. It answers for this process alone (no --fallback: polkit does not use a fallback
 * agent for a process), so the session's own agent, if any, is not replaced. Does nothing when stdin
 * is not a terminal (nobody to ask), when the caller is root (rightsized asks polkit nothing for
 * root), when $RIGHTSIZECTL_NO_POLKIT_AGENT is set, or when pkttyagent cannot be run. The agent
 * is stopped at exit. */
void ctl_polkit_agent_open(void);
/* Stops the agent (SIGTERM, then waits for it). Harmless when none runs. */
void ctl_polkit_agent_close(void);
