/*
 * pty-chat: run a command on a pseudo-terminal and talk to it from a
 * script, like a tiny expect(1), for testing interactive programs.
 *
 *	pty-chat [-t SECONDS] [-o TRANSCRIPT] [-f SCRIPT] CMD [ARGS...]
 *
 * The script is read from SCRIPT, or from standard input.
 * SCRIPT lines:
 *	expect TEXT	wait until the output (after the previous match)
 *			contains TEXT
 *	send TEXT	type TEXT and a newline
 *	sh COMMAND	run COMMAND with /bin/sh -c (e.g. to signal a daemon)
 *	sleep MS	pause
 *	eof		type the terminal's end-of-file character (Ctrl-D)
 *	wait		wait for the command to exit; pty-chat exits with its
 *			status
 * Blank lines and lines starting with # are ignored.  Exit status 100 if
 * an expect times out (the output so far goes to stderr), else the
 * command's at "wait", else 0.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define OUT_MAX		(1 << 20)

static char out[OUT_MAX + 1];
static size_t outlen, matched;
static int master = -1;
static pid_t child;
static FILE *transcript;

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read what the command printed, for at most ms. */
static int
pump(int ms)
{
	struct pollfd pfd = { master, POLLIN, 0 };
	ssize_t n;

	if (master == -1)
		return -1;
	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	n = read(master, out + outlen, OUT_MAX - outlen);
	if (n <= 0) {
		close(master);
		master = -1;
		return -1;
	}
	if (transcript != NULL)
		fwrite(out + outlen, 1, (size_t)n, transcript);
	outlen += (size_t)n;
	out[outlen] = '\0';
	return 1;
}

static int
expect(const char *text, int secs)
{
	long long end = now_ms() + secs * 1000LL;
	char *p;

	for (;;) {
		if ((p = strstr(out + matched, text)) != NULL) {
			matched = (size_t)(p - out) + strlen(text);
			return 0;
		}
		if (now_ms() >= end || pump(50) == -1) {
			if ((p = strstr(out + matched, text)) != NULL) {
				matched = (size_t)(p - out) + strlen(text);
				return 0;
			}
			fprintf(stderr, "pty-chat: timed out waiting for \"%s\"; "
			    "output after the last match:\n%s\n", text,
			    out + matched);
			return -1;
		}
	}
}

static void
send_text(const char *s)
{
	size_t n = strlen(s);

	if (master == -1)
		return;
	if (write(master, s, n) != (ssize_t)n || write(master, "\r", 1) != 1)
		fprintf(stderr, "pty-chat: write: %s\n", strerror(errno));
}

int
main(int argc, char **argv)
{
	char line[4096];
	int c, secs = 10, st;
	size_t n;
	struct termios tio;
	FILE *script = stdin;

	while ((c = getopt(argc, argv, "+f:t:o:")) != -1) {
		switch (c) {
		case 'f':
			if ((script = fopen(optarg, "r")) == NULL) {
				perror(optarg);
				return 2;
			}
			break;
		case 't':
			secs = atoi(optarg);
			break;
		case 'o':
			transcript = fopen(optarg, "w");
			break;
		default:
			fprintf(stderr, "usage: pty-chat [-t SECONDS] "
			    "[-o TRANSCRIPT] [-f SCRIPT] CMD [ARGS...]\n");
			return 2;
		}
	}
	if (optind >= argc)
		return 2;
	child = forkpty(&master, NULL, NULL, NULL);
	if (child == -1) {
		perror("forkpty");
		return 2;
	}
	if (child == 0) {
		execvp(argv[optind], argv + optind);
		perror(argv[optind]);
		_exit(127);
	}
	while (fgets(line, sizeof(line), script) != NULL) {
		n = strlen(line);
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n == 0 || line[0] == '#')
			continue;
		if (strncmp(line, "expect ", 7) == 0) {
			if (expect(line + 7, secs) != 0) {
				kill(child, SIGKILL);
				waitpid(child, NULL, 0);
				return 100;
			}
		} else if (strncmp(line, "send ", 5) == 0)
			send_text(line + 5);
		else if (strncmp(line, "sh ", 3) == 0) {
			if (system(line + 3) != 0)
				fprintf(stderr, "pty-chat: failed: %s\n", line + 3);
		} else if (strncmp(line, "sleep ", 6) == 0) {
			long long end = now_ms() + atoi(line + 6);

			while (now_ms() < end)
				pump((int)(end - now_ms()));
		} else if (strcmp(line, "eof") == 0) {
			if (master != -1 && tcgetattr(master, &tio) == 0)
				c = tio.c_cc[VEOF];
			else
				c = 4;
			if (master != -1 && write(master, &c, 1) != 1)
				fprintf(stderr, "pty-chat: write EOF failed\n");
		} else if (strcmp(line, "wait") == 0) {
			long long end = now_ms() + secs * 1000LL;

			for (;;) {
				pid_t r = waitpid(child, &st, WNOHANG);

				if (r == child)
					break;
				if (now_ms() >= end) {
					fprintf(stderr, "pty-chat: command did not "
					    "exit\n");
					kill(child, SIGKILL);
					waitpid(child, NULL, 0);
					return 100;
				}
				if (pump(50) == -1)
					usleep(10000);
			}
			while (pump(0) == 1)
				;
			return WIFEXITED(st) ? WEXITSTATUS(st) :
			    128 + WTERMSIG(st);
		} else {
			fprintf(stderr, "pty-chat: bad script line: %s\n", line);
			return 2;
		}
	}
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
	return 0;
}
