#ifndef DIFFCAST_CSYSTEM_SHIM_H
#define DIFFCAST_CSYSTEM_SHIM_H

/* POSIX and glibc helpers that Swift's Glibc module does not reach (macros, glibc-only calls,
   struct ucred), apart from libuv's module so that code without an event loop can use them. */

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <malloc.h>
#include <sys/syscall.h>

/* Gives the memory that freed objects left inside the heap back to the system (glibc keeps
   it otherwise): called after collections were dropped. */
static inline void dc_release_free_memory(void) { malloc_trim(0); }

/* Ignores SIGPIPE: libuv does not, and a peer that closes with unread data would kill us. */
static inline void dc_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

/* Unblocks the signals the daemon handles: a parent may have started us with them blocked
   (a process spawned from a thread that blocks signals inherits its mask). */
static inline void dc_unblock_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* Connects to a Unix socket path to find out whether a daemon already serves it.
   Returns 0 when something accepted the connection, else the errno of the attempt. */
static inline int dc_probe_unix_socket(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    int result = connect(fd, (struct sockaddr *)&address, sizeof address);
    int error = result == 0 ? 0 : errno;
    close(fd);
    return error;
}

/* The peer's user and group of a connected Unix socket (SO_PEERCRED), without depending on
   _GNU_SOURCE for struct ucred. Returns 0 on success, else errno. */
struct dc_peer_credentials { pid_t pid; uid_t uid; gid_t gid; };
static inline int dc_peer_credentials(int fd, uid_t *uid, gid_t *gid) {
    struct dc_peer_credentials credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return errno;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

/* send(2) with MSG_DONTWAIT | MSG_NOSIGNAL, by the raw system call: glibc's send() is a
   cancellation point, and switches cancellation on and off around every call (about 30
   instructions, a tenth of a fan-out's user-space cost per subscriber); the loop thread is never
   cancelled. Returns the bytes the kernel took, or -1 with errno set. */
static inline ssize_t dc_send_now(int fd, const void *bytes, size_t count) {
    return syscall(SYS_sendto, fd, bytes, count, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
}

/* The longest Unix socket path the kernel takes (libuv 1.44 truncates longer ones silently). */
static inline size_t dc_unix_path_max(void) {
    struct sockaddr_un address;
    return sizeof address.sun_path - 1;
}

#endif
