/*
 * relay-bare: the cheapest TCP relay we know how to write, for the relay
 * benchmark's floor.  It does what a relay cannot avoid and nothing else:
 * one epoll loop, one read of up to 128 KiB per wake-up (the gateway's
 * read size), written on at once; no parsing, no checks, no buffering
 * beyond one read per direction.  Whatever this reaches on a machine,
 * no relay in a separate process (the gateway included) can beat by much:
 * it bounds what the gateway/direct ratio can be there.
 *
 *	relay-bare -l ADDR:PORT -u ADDR:PORT [-p PORTFILE]
 *
 * Loopback only by intent (numeric IPv4 addresses); -l with port 0 picks
 * a free port, written to PORTFILE once listening.
 */
#include <sys/epoll.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF	(128 * 1024)

struct side {
	int		 fd;
	struct side	*peer;
	char		*buf;		/* read from fd, not yet written to peer */
	size_t		 off, len;
	int		 is_listener;
};

static int ep;

static void
usage(void)
{
	fprintf(stderr, "usage: relay-bare -l ADDR:PORT -u ADDR:PORT [-p PORTFILE]\n");
	exit(2);
}

static void
parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *c = strrchr(s, ':');
	char *end;
	long port;

	if (c == NULL || (size_t)(c - s) >= sizeof(host))
		usage();
	memcpy(host, s, (size_t)(c - s));
	host[c - s] = '\0';
	port = strtol(c + 1, &end, 10);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((unsigned short)port);
	if (*end != '\0' || port < 0 || port > 65535 ||
	    inet_pton(AF_INET, host, &a->sin_addr) != 1) {
		fprintf(stderr, "relay-bare: bad address \"%s\" (IPv4:PORT)\n", s);
		exit(2);
	}
}

static void
watch(struct side *s, int op, unsigned ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = s };

	if (epoll_ctl(ep, op, s->fd, &e) == -1) {
		perror("relay-bare: epoll_ctl");
		exit(1);
	}
}

static void
pair_close(struct side *s)
{
	struct side *p = s->peer;

	close(s->fd);
	close(p->fd);
	free(s->buf);
	free(p->buf);
	free(s);
	free(p);
}

/* Write s's pending bytes to its peer; 1 when all are out. */
static int
drain(struct side *s)
{
	ssize_t n;

	while (s->off < s->len) {
		n = write(s->peer->fd, s->buf + s->off, s->len - s->off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -1;
		}
		s->off += (size_t)n;
	}
	s->off = s->len = 0;
	return 1;
}

/* Returns -1 when the pair is finished. */
static int
readable(struct side *s)
{
	ssize_t n;

	if (s->len > 0)		/* not written yet (a hang-up while paused) */
		return 0;
	n = read(s->fd, s->buf, BUF);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (n < 0)
		return 0;
	s->off = 0;
	s->len = (size_t)n;
	switch (drain(s)) {
	case -1:
		return -1;
	case 0:		/* peer full: stop reading s, wait for the peer */
		watch(s, EPOLL_CTL_MOD, 0);
		watch(s->peer, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
		break;
	}
	return 0;
}

/* s's socket can take more: finish what its peer read. */
static int
writable(struct side *s)
{
	struct side *p = s->peer;

	switch (drain(p)) {
	case -1:
		return -1;
	case 1:
		watch(s, EPOLL_CTL_MOD, EPOLLIN);
		watch(p, EPOLL_CTL_MOD, EPOLLIN);
		break;
	}
	return 0;
}

static struct side *
side_new(int fd)
{
	struct side *s = calloc(1, sizeof(*s));
	int one = 1;

	if (s == NULL || (s->buf = malloc(BUF)) == NULL) {
		perror("relay-bare");
		exit(1);
	}
	s->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return s;
}

static void
accept_one(int lfd, const struct sockaddr_in *up)
{
	struct side *a, *b;
	int c, u;

	if ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) == -1)
		return;
	u = socket(AF_INET, SOCK_STREAM, 0);
	if (u == -1 || connect(u, (const struct sockaddr *)up, sizeof(*up)) == -1) {
		perror("relay-bare: connect");
		close(c);
		if (u != -1)
			close(u);
		return;
	}
	if (fcntl(u, F_SETFL, O_NONBLOCK) == -1) {
		close(c);
		close(u);
		return;
	}
	a = side_new(c);
	b = side_new(u);
	a->peer = b;
	b->peer = a;
	watch(a, EPOLL_CTL_ADD, EPOLLIN);
	watch(b, EPOLL_CTL_ADD, EPOLLIN);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in la, ua;
	struct side lside = { .is_listener = 1 };
	socklen_t sl = sizeof(la);
	const char *l = NULL, *u = NULL, *pf = NULL;
	int ch, one = 1;

	while ((ch = getopt(argc, argv, "l:u:p:")) != -1) {
		switch (ch) {
		case 'l': l = optarg; break;
		case 'u': u = optarg; break;
		case 'p': pf = optarg; break;
		default: usage();
		}
	}
	if (l == NULL || u == NULL || optind != argc)
		usage();
	parse_addr(l, &la);
	parse_addr(u, &ua);

	lside.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(lside.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lside.fd, (struct sockaddr *)&la, sizeof(la)) == -1 ||
	    listen(lside.fd, 16) == -1 ||
	    getsockname(lside.fd, (struct sockaddr *)&la, &sl) == -1) {
		perror("relay-bare: listen");
		return 1;
	}
	if ((ep = epoll_create1(0)) == -1) {
		perror("relay-bare: epoll_create1");
		return 1;
	}
	watch(&lside, EPOLL_CTL_ADD, EPOLLIN);
	if (pf != NULL) {
		FILE *f = fopen(pf, "w");

		if (f == NULL || fprintf(f, "%u\n", ntohs(la.sin_port)) < 0 ||
		    fclose(f) != 0) {
			perror(pf);
			return 1;
		}
	}
	for (;;) {
		struct epoll_event ev[32];
		int i, n = epoll_wait(ep, ev, 32, -1);

		for (i = 0; i < n; i++) {
			struct side *s = ev[i].data.ptr;

			if (s->is_listener) {
				accept_one(s->fd, &ua);
				continue;
			}
			if (((ev[i].events & EPOLLOUT) && writable(s) == -1) ||
			    ((ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
			    readable(s) == -1)) {
				pair_close(s);
				break;	/* the other events may name the pair */
			}
		}
	}
}
