/*
 * umem: usbfs zero-copy transfer buffers (protocol.md 1.9.3).
 *
 * A buffer from libusb_dev_mem_alloc() is memory usbfs mapped for one
 * device handle: a transfer in it is not copied between the agent and
 * the kernel (nor allocated and zeroed by the kernel per URB), and IN
 * data completed into it goes to the socket from there.  The mapping
 * belongs to the handle, and a buffer can be lent to a connection's
 * output past the transfer, so the umem of a handle owns the handle's
 * end: umem_close() unmaps what is free, and the handle is closed
 * (libusb_close) once the last buffer out has come back — from the
 * event loop, never inside a libusb callback.
 *
 * Bounded: at most UMEM_MAX_BUFS buffers per handle and UMEM_MAX_TOTAL
 * bytes mapped by the agent (usbfs counts them against its
 * usbfs_memory_mb, 16 MiB by default, shared with the URBs it
 * allocates).  When a buffer cannot be had, the caller uses its own
 * memory and usbfs copies, as before.
 */
#ifndef USBGW_AGENT_UMEM_H
#define USBGW_AGENT_UMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <libusb.h>

#define UMEM_MIN	4096		/* smaller transfers: copied */
#define UMEM_MAX_BUFS	16		/* per handle, out and kept */
#define UMEM_MAX_TOTAL	(4u << 20)	/* mapped by the agent */
#define UMEM_MAX_BUF	(1u << 20)	/* one buffer at most */

struct umem;

/* How buffers are made and the handle closed (libusb by default; the
 * unit test replaces them). */
struct umem_ops {
	uint8_t	*(*alloc)(libusb_device_handle *, size_t);
	void	 (*free)(libusb_device_handle *, uint8_t *, size_t);
	void	 (*close)(libusb_device_handle *);
};

void		 umem_setup(struct event_base *, const struct umem_ops *,
		    bool enabled);
void		 umem_teardown(void);

struct umem	*umem_new(libusb_device_handle *);
uint8_t		*umem_get(struct umem *, size_t len, size_t *cap);
void		 umem_put(struct umem *, uint8_t *);
void		 umem_close(struct umem *);

/* For reports and tests. */
size_t		 umem_mapped(void);
unsigned	 umem_out(const struct umem *);
unsigned long long umem_hits(void);

#endif
