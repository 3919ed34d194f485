/*
 * usbgw-agent's guardian: see guard.h.
 *
 * Why a process of its own: a dead agent's usbfs file descriptors are
 * closed by the kernel, whose usbdev_release() (drivers/usb/core/devio.c)
 * releases the claimed interfaces and probes no driver; libusb re-attaches
 * only inside libusb_release_interface().  So a thin client whose agent
 * was SIGKILLed would keep its keyboard, disk and serial port without any
 * driver -- closed, but not the thin client's any more.  The guardian
 * holds the read end of a pipe; the write end exists only in the agent
 * (close-on-exec, so nothing the agent starts inherits it).  EOF means the
 * agent is gone, however it went.
 *
 * The guardian is forked before libusb_init() and before any listener
 * exists, so it holds no USB handle and no socket; it runs with the
 * agent's credentials and needs only the device nodes the udev rule
 * grants.
 */
#include <sys/prctl.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "guard.h"
#include "usbdev.h"

static void
guard_main(int rfd, const char *state_file)
{
	char	 c, err[512];
	ssize_t	 n;
	int	 done;

	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	(void)prctl(PR_SET_NAME, "usbgw-guardian", 0, 0, 0);
	do
		n = read(rfd, &c, 1);
	while (n == -1 && errno == EINTR);
	/* EOF (or an error): the agent is gone. */
	done = usbdev_reattach_state(state_file, err, sizeof(err));
	if (done == -1)
		log_warnx("guardian: %s", err);
	else if (done > 0)
		log_info("guardian: the agent ended holding %d device%s: "
		    "kernel drivers back", done, done == 1 ? "" : "s");
	_exit(done == -1 ? 1 : 0);
}

int
guard_start(const char *state_file)
{
	int	 p[2];
	pid_t	 pid;

	if (pipe2(p, O_CLOEXEC) == -1)
		return -1;
	switch ((pid = fork())) {
	case -1:
		close(p[0]);
		close(p[1]);
		return -1;
	case 0:
		close(p[1]);
		guard_main(p[0], state_file);
		/* NOTREACHED */
	default:
		break;
	}
	close(p[0]);
	/* p[1] stays open for the agent's life: its EOF is the signal. */
	log_debug("guardian pid %ld for %s", (long)pid, state_file);
	return 0;
}
