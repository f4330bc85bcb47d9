#ifndef DIFFCAST_CEPOLL_SHIM_H
#define DIFFCAST_CEPOLL_SHIM_H

/* epoll, which Swift's Glibc module leaves out: the fan-out benchmark reads 19,000 subscriber
   sockets on one thread, where poll(2) would cost the reader more than the server's work. */
#include <sys/epoll.h>

#endif
