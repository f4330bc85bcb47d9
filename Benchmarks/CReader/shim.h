#ifndef DIFFCAST_CREADER_SHIM_H
#define DIFFCAST_CREADER_SHIM_H

/* The system calls of the fan-out benchmark's reader, which reads 19,000 subscriber sockets on
   one thread and must cost less per delivery than the servers it measures. */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* recv(2) without glibc's wrapper, which makes the call a cancellation point by switching the
   thread's cancellation on and off around it; the reader is never cancelled. Non-blocking. */
static inline ssize_t bench_recv_now(int fd, void *bytes, size_t count) {
    return syscall(SYS_recvfrom, fd, bytes, count, MSG_DONTWAIT, NULL, NULL);
}

#endif
