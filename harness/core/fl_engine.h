/* What every fabric-lab engine (fl-impair, fl-bfd, fl-probe, fl-srv6) does the same way:
 * its clock, how it dies, and how it opens a TAP or binds a packet socket to a port.
 *
 * One copy, so a fix (a flag on the TAP, the clock an engine's timestamps are on) reaches
 * every engine at once. Define ENGINE_NAME (the program's name, for its error lines) before
 * including it; the Makefile puts this folder on each engine's include path. */
#ifndef FL_ENGINE_H
#define FL_ENGINE_H

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
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

#endif
