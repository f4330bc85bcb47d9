#ifndef DIFFCAST_CNATS_SHIM_H
#define DIFFCAST_CNATS_SHIM_H

/* The official NATS C client (Debian's libnats-dev): connections, JetStream and key-value. */
#include <nats/nats.h>

#endif
