/*
 * The guardian (protocol.md 1.9.2): a small process forked before
 * libusb starts, which gives the held devices back to their kernel
 * drivers when the agent dies without doing it itself (SIGKILL, a
 * crash).  The kernel does not: usbfs' release probes no driver.
 */
#ifndef USBGW_AGENT_GUARD_H
#define USBGW_AGENT_GUARD_H

/*
 * Fork the guardian for state_file.  It ignores SIGTERM, SIGINT and
 * SIGHUP, waits for EOF on a pipe whose write end only this process
 * holds, then re-attaches the kernel drivers of every device the state
 * file still lists (usbdev_reattach_state) and exits.  A clean stop
 * removes the state file first, so the guardian finds nothing to do.
 * -1 (errno set) if it could not be started.
 */
int	guard_start(const char *state_file);

#endif
