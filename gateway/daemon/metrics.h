/* The Prometheus text endpoint: see metrics.c. */
#ifndef USBGW_METRICS_H
#define USBGW_METRICS_H

struct event_base;
struct config;

/* 0 (also when off), -1 if the listener cannot be opened. */
int	metrics_start(struct event_base *, const struct config *);
void	metrics_stop(void);

#endif
