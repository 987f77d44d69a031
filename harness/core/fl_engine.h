/* What every fabric-lab engine (fl-impair, fl-bfd, fl-probe, fl-srv6, fl-port) does the same
 * way: its clock, how it dies, how it opens a TAP or binds a packet socket to a port, how it
 * takes the frames tc redirects to a TAP, and its control socket.
 *
 * One copy, so a fix (a flag on the TAP, the clock an engine's timestamps are on) reaches
 * every engine at once. Define ENGINE_NAME (the program's name, for its error lines) before
 * including it; the Makefile puts this folder on each engine's include path. */
#ifndef FL_ENGINE_H
#define FL_ENGINE_H

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <time.h>

#ifndef ENGINE_NAME
#error "define ENGINE_NAME before including fl_engine.h"
#endif

static inline int64_t ns_of(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

/* CLOCK_MONOTONIC: an engine's due times and the timestamps it reports to Python (which
 * reads time.monotonic_ns()) are on the one clock. */
static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ns_of(&ts);
}

/* A failed set-up step: the step and errno's words on stderr (the engine's log), exit 1. */
__attribute__((noreturn)) static inline void die(const char *what)
{
    fprintf(stderr, ENGINE_NAME ": %s: %s\n", what, strerror(errno));
    exit(1);
}

/* A TAP named `name`: non-blocking, frames without packet information. */
static inline int tap_create(const char *name)
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        die("open /dev/net/tun");
    struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
        die("TUNSETIFF");
    return fd;
}

/* Bind packet socket `fd` to the port with index `ifindex` for `protocol` (host order):
 * 0, or -1 with errno set (an index of 0, a port that went away). */
static inline int packet_bind(int fd, int ifindex, uint16_t protocol)
{
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_protocol = htons(protocol),
                               .sll_ifindex = ifindex};
    if (!ifindex) {
        errno = ENODEV;
        return -1;
    }
    return bind(fd, (struct sockaddr *)&addr, sizeof(addr));
}

/* A TAP that only sinks what tc redirects to it (mirred): a socket filter drops every frame
 * on its own queue, frames are read from tap_capture's socket, and it carries nothing of its
 * own (no IPv6, no ARP). Its MTU is `iface`'s, the port whose frames it takes. */
static inline int sink_tap(const char *name, const char *iface)
{
    int fd = tap_create(name);
    struct sock_filter drop_all = BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_fprog filter = {.len = 1, .filter = &drop_all};
    if (ioctl(fd, TUNATTACHFILTER, &filter) < 0)
        die("TUNATTACHFILTER");
    char path[128];
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", name);
    int sys = open(path, O_WRONLY | O_CLOEXEC);
    if (sys >= 0) {
        if (write(sys, "1", 1) != 1)
            die("disable_ipv6");
        close(sys);
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq q = {0};
    snprintf(q.ifr_name, IFNAMSIZ, "%s", iface);
    if (ioctl(s, SIOCGIFMTU, &q) < 0)
        die(iface);
    snprintf(q.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(s, SIOCSIFMTU, &q) < 0)
        die("SIOCSIFMTU");
    q.ifr_qlen = 10000;   /* bursts at line rate must not overflow the TAP's qdisc */
    if (ioctl(s, SIOCSIFTXQLEN, &q) < 0)
        die("SIOCSIFTXQLEN");
    if (ioctl(s, SIOCGIFFLAGS, &q) < 0)
        die("SIOCGIFFLAGS");
    q.ifr_flags |= IFF_UP | IFF_NOARP;
    if (ioctl(s, SIOCSIFFLAGS, &q) < 0)
        die("SIOCSIFFLAGS");
    close(s);
    return fd;
}

/* The frames `tap` transmits (the redirected ones), each with the kernel's timestamp when
 * `stamped`; `buffer` bytes of them wait for the engine (a burst at line rate). */
static inline int tap_capture(const char *tap, int buffer, int stamped)
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);   /* none until bound */
    if (fd < 0)
        die("socket(AF_PACKET)");
    int one = 1;
    if (stamped && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0)
        die("SO_TIMESTAMPNS");
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    if (packet_bind(fd, (int)if_nametoindex(tap), ETH_P_ALL) < 0)
        die(tap);
    return fd;
}

/* `n` messages out of `fd` in as few sendmmsg calls as the socket allows; one it refuses is
 * skipped. `result(i, err, ctx)` hears of each message: err 0 once sent, else the errno. */
static inline void send_each(int fd, struct mmsghdr *msgs, int n,
                             void (*result)(int i, int err, void *ctx), void *ctx)
{
    for (int done = 0; done < n;) {
        int sent = sendmmsg(fd, msgs + done, (unsigned)(n - done), 0);
        int err = sent < 0 ? errno : 0, settled = sent > 0 ? sent : 1;
        for (int i = done; i < done + settled; i++)
            result(i, err, ctx);
        done += settled;
    }
}

/* The control socket at `path` (SOCK_SEQPACKET, listening): bound last, so an engine is
 * ready once it answers there. */
static inline int control_listen(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sun.sun_path)) {
        errno = ENAMETOOLONG;
        die(path);
    }
    strcpy(sun.sun_path, path);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 8) < 0)
        die(path);
    return fd;
}

#endif
