/*
 * slow-nss.so: an LD_PRELOAD shim that makes the user database slow, the
 * way a directory server (LDAP, sssd with its backend down) can be.
 * getpwuid_r sleeps for the number of milliseconds written in the file
 * named by USBGW_TEST_NSS_DELAY_FILE (read at every call, so a test can
 * change it while the daemon runs; missing or empty: no delay), then
 * does the real lookup.  Tests only.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*getpwuid_r_fn)(uid_t, struct passwd *, char *, size_t,
    struct passwd **);

static long
delay_ms(void)
{
	const char *path = getenv("USBGW_TEST_NSS_DELAY_FILE");
	char buf[32];
	ssize_t n;
	int fd;

	if (path == NULL || (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

int
getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t len,
    struct passwd **res)
{
	getpwuid_r_fn real = (getpwuid_r_fn)dlsym(RTLD_NEXT, "getpwuid_r");
	long ms = delay_ms();
	struct timespec ts;

	if (ms > 0) {
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000L;
		while (nanosleep(&ts, &ts) == -1)
			;
	}
	return real(uid, pw, buf, len, res);
}
