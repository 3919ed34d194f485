/*
 * The local attach back end: approved devices go to this host's vhci_hcd
 * through sysfs (vhci.c), either with the upstream socket itself (direct)
 * or through a socketpair the gateway relays (inspected).  The contract
 * is at struct attach_ops in attach.h.
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/attach.h"
#include "base/log.h"
#include "base/util.h"
#include "host/vhci.h"

struct local_be {
	struct vhci			*v;
	struct attach_local_params	 params;
};

static struct vhci *
be_vhci(struct attach_backend *be)
{
	return ((struct local_be *)be->priv)->v;
}

static void
close_keep_errno(int fd)
{
	int saved = errno;

	if (fd != -1)
		close(fd);
	errno = saved;
}

/*
 * The kernel reads and writes the socket with the socket's own timeouts
 * (sk_rcvtimeo/sk_sndtimeo): clear any the gateway set, or vhci_rx gives
 * up on an idle device.  Nagle only adds latency to small URBs.
 */
static void
prepare_direct(int fd)
{
	struct timeval tv0 = { 0, 0 };
	int one = 1;

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv0, sizeof(tv0));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv0, sizeof(tv0));
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int
local_attach(struct attach_backend *be, struct attach_ctx *ctx)
{
	struct vhci *v = be_vhci(be);
	int sv[2] = { -1, -1 }, kfd, type, sndbuf = (int)ATTACH_PAIR_SNDBUF;
	socklen_t len = sizeof(type);
	unsigned int port;

	if (ctx->state == ATTACH_ATTACHED) {
		errno = EALREADY;
		return -1;
	}
	if (ctx->upstream_fd < 0 ||
	    getsockopt(ctx->upstream_fd, SOL_SOCKET, SO_TYPE, &type,
	    &len) == -1 || type != SOCK_STREAM) {
		log_warnx("%s: upstream descriptor is not a stream socket",
		    ctx->busid);
		errno = EBADF;
		return -1;
	}
	if (ctx->mode == ATTACH_DIRECT) {
		prepare_direct(ctx->upstream_fd);
		kfd = ctx->upstream_fd;
	} else {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    sv) == -1) {
			log_warn("%s: socketpair", ctx->busid);
			return -1;
		}
		/* Room for a burst of 64 KiB URBs each way; best effort. */
		(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf,
		    sizeof(sndbuf));
		(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf,
		    sizeof(sndbuf));
		if (fd_nonblock_cloexec(sv[0]) == -1) {
			log_warn("%s: socketpair flags", ctx->busid);
			close_keep_errno(sv[0]);
			close_keep_errno(sv[1]);
			return -1;
		}
		kfd = sv[1];
	}
	if (vhci_attach(v, kfd, ctx->devid, ctx->speed, &port) == -1) {
		log_warn("%s: local attach (%s)", ctx->busid,
		    attach_mode_name(ctx->mode));
		close_keep_errno(sv[0]);
		close_keep_errno(sv[1]);
		ctx->state = ATTACH_IDLE;
		return -1;
	}
	/* The kernel holds its own reference to the socket now. */
	if (sv[1] != -1)
		close(sv[1]);
	ctx->port = (int)port;
	ctx->kernel_fd = kfd;
	ctx->relay_fd = sv[0];
	ctx->local_busid[0] = '\0';
	ctx->state = ATTACH_ATTACHED;
	log_info("%s: attached to local vhci port %u (%s)", ctx->busid, port,
	    attach_mode_name(ctx->mode));
	return 0;
}

/*
 * Where ctx's port stands: 1 still ours (starting, used by our device,
 * or failing), 0 gone (free, or reused by another device), -1 unknown.
 */
static int
port_state(struct vhci *v, const struct attach_ctx *ctx,
    const struct vhci_port **pp)
{
	const struct vhci_port *p;

	if ((p = vhci_port(v, (unsigned int)ctx->port)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (vhci_refresh_controller(v, p->controller) == -1) {
		errno = EIO;
		return -1;
	}
	*pp = p;
	switch (p->status) {
	case VHCI_ST_FREE:
		return 0;
	case VHCI_ST_USED:
		if (p->devid != ctx->devid || p->sockfd != ctx->kernel_fd) {
			log_warnx("%s: vhci port %d now holds another device "
			    "(devid %08x, fd %d); leaving it alone", ctx->busid,
			    ctx->port, p->devid, p->sockfd);
			return 0;
		}
		return 1;
	case VHCI_ST_INIT:
	case VHCI_ST_ERROR:
		return 1;
	default:
		errno = EIO;
		return -1;
	}
}

static int
local_detach(struct attach_backend *be, struct attach_ctx *ctx)
{
	struct vhci *v = be_vhci(be);
	const struct vhci_port *p;
	int rv;

	if (ctx->state != ATTACH_ATTACHED || ctx->port < 0)
		return 0;
	if ((rv = port_state(v, ctx, &p)) == -1)
		return -1;
	if (rv == 1 && vhci_detach(v, (unsigned int)ctx->port) == -1) {
		/* EINVAL: it left by itself meanwhile ("not connected"). */
		if (errno != EINVAL || port_state(v, ctx, &p) != 0)
			return -1;
	}
	ctx->state = ATTACH_DETACHED;
	log_info("%s: detached from local vhci port %d", ctx->busid,
	    ctx->port);
	return 0;
}

static int
local_check(struct attach_backend *be, struct attach_ctx *ctx)
{
	const struct vhci_port *p;
	int rv;

	if (ctx->state != ATTACH_ATTACHED || ctx->port < 0)
		return 0;
	if ((rv = port_state(be_vhci(be), ctx, &p)) == 0) {
		ctx->state = ATTACH_DETACHED;
		log_info("%s: vhci port %d let go", ctx->busid, ctx->port);
	}
	return rv;
}

static int
local_intf_cb(void *arg, const struct vhci_intf *vi)
{
	struct attach_authz *az = arg;
	struct attach_intf ai;

	ai.name = vi->name;
	ai.config = vi->config;
	ai.number = vi->number;
	ai.iclass = vi->iclass;
	ai.isubclass = vi->isubclass;
	ai.iprotocol = vi->iprotocol;
	return az->allow(az->arg, &ai) == 1;
}

static int
local_authorize(struct attach_backend *be, struct attach_ctx *ctx,
    struct attach_authz *az)
{
	struct vhci_authz_result res;
	int rv;

	if (ctx->state != ATTACH_ATTACHED || ctx->port < 0) {
		errno = ENODEV;
		return -1;
	}
	rv = vhci_authorize(be_vhci(be), (unsigned int)ctx->port, ctx->devid,
	    ctx->kernel_fd, az != NULL && az->allow != NULL ? local_intf_cb :
	    NULL, az, &res);
	if (rv == 0) {
		usbgw_strlcpy(ctx->local_busid, res.local_busid,
		    sizeof(ctx->local_busid));
		if (az != NULL) {
			az->nallowed = res.nallowed;
			az->ndenied = res.ndenied;
		}
	} else if (rv == -1)
		log_warn("%s: authorizing on vhci port %d", ctx->busid,
		    ctx->port);
	return rv;
}

static int
local_reconcile(struct attach_backend *be, struct attach_found **found,
    size_t *nfound)
{
	struct vhci *v = be_vhci(be);
	struct vhci_port *used;
	struct attach_found *f;
	size_t n, i;

	*found = NULL;
	*nfound = 0;
	if (vhci_refresh(v) == -1)
		log_warnx("vhci: some status unreadable; its ports are not "
		    "reconciled");
	vhci_used_ports(v, &used, &n);
	if (n == 0)
		return 0;
	f = xcalloc(n, sizeof(*f));
	for (i = 0; i < n; i++) {
		f[i].port = (int)used[i].port;
		f[i].live = used[i].status == VHCI_ST_USED;
		f[i].devid = used[i].devid;
		f[i].kernel_fd = used[i].sockfd;
		f[i].speed = used[i].speed;
		usbgw_strlcpy(f[i].local_busid, used[i].local_busid,
		    sizeof(f[i].local_busid));
		f[i].verdict = ATTACH_V_FOREIGN;
		f[i].record = -1;
	}
	free(used);
	*found = f;
	*nfound = n;
	return 0;
}

static void
local_free(struct attach_backend *be)
{
	struct local_be *lb;

	if (be == NULL)
		return;
	lb = be->priv;
	if (lb != NULL)
		vhci_free(lb->v);
	free(lb);
	free(be);
}

const struct attach_ops attach_local_ops = {
	.name = "local",
	.attach = local_attach,
	.detach = local_detach,
	.check = local_check,
	.authorize = local_authorize,
	.reconcile = local_reconcile,
	.free = local_free,
};

struct attach_backend *
attach_local_new(struct vhci *v, const struct attach_local_params *params)
{
	struct attach_backend *be;
	struct local_be *lb;
	int dev = -1, intf = -1;

	if (params != NULL) {
		dev = params->lockdown ? 0 : -1;
		intf = params->per_interface ? 0 : -1;
	}
	if ((dev != -1 || intf != -1) &&
	    vhci_set_authorized_default(v, dev, intf) == -1) {
		log_warnx("vhci: lock-down requested but not in force");
		return NULL;
	}
	lb = xcalloc(1, sizeof(*lb));
	lb->v = v;
	if (params != NULL)
		lb->params = *params;
	be = xcalloc(1, sizeof(*be));
	be->ops = &attach_local_ops;
	be->priv = lb;
	return be;
}

struct vhci *
attach_local_vhci(struct attach_backend *be)
{
	return be_vhci(be);
}

int
attach_local_detach_port(struct attach_backend *be, unsigned int port)
{
	log_warnx("vhci: detaching port %u on an explicit order", port);
	return vhci_detach(be_vhci(be), port);
}
