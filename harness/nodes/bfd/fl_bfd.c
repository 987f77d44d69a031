/* fl-bfd: a node's BFD data plane, the offload bfdd hands its packet work to.
 *
 * bfdd (FRR) started with `--dplaneaddr unix:SOCKET` keeps BFD's configuration, its clients
 * (bgpd, staticd) and its CLI, and sends every session to the data plane that connects to
 * SOCKET (FRR's BFD data-plane protocol, bfdd/bfddp_packet.h, version 1). This program is
 * that data plane, as a switch ASIC's BFD offload is: it sends and receives the control
 * packets (RFC 5880 asynchronous mode, RFC 5881 single hop, RFC 5883 multihop) and the echo
 * packets (IPv4, looped through the peer's forwarding plane), runs each session's state
 * machine and detection timers, and reports every state change back to bfdd, which tells its
 * clients as it always does.
 *
 * Why: bfdd wakes for every packet and timer of every session; a lab of a hundred nodes with
 * BFD at 100 ms spends its cores there. This engine's time runs in ticks (a quarter of the
 * shortest interval, at least 1 ms, printed at start) and it wakes only on the ticks where
 * something falls due, for all its sessions at once: it reads every socket, expires detection
 * timers, then sends what is due. Sessions that send on the same tick draw their jitter
 * together and so stay together: a node's sessions settle on one schedule, and the engine
 * wakes about once per interval rather than on every tick. Packets are stamped by the kernel
 * on arrival (SO_TIMESTAMPNS), so a detection timer starts when the packet came, however
 * late it is read; a detection comes at most one tick late, and a Poll is answered when the
 * session next sends.
 *
 *   fl-bfd SOCKET FEED [tick_us]
 *
 * bfdd listens on SOCKET; the supervisor (below) connects, retrying every 100 ms, and
 * connects again when bfdd restarts (bfdd then sends its sessions anew). A state change is
 * logged on stdout.
 *
 * FEED is a SOCK_SEQPACKET socket the engine serves for whoever must act on a session the
 * moment it changes (the host's spray agent): one message per session on connect, then one per
 * change, "IFNAME 4|6 PEER up|down|gone WALL_US" (WALL_US: see tell). bfdd's own control
 * socket cannot serve: FRR 8.4 does not tell its control clients about changes a data plane
 * reports.
 *
 * The engine runs supervised, as a switch's process manager runs its agents: the process
 * started (named fl-bfd-watch) holds the connection to bfdd, forks the engine with it, and
 * starts another when the engine dies (100 ms, doubling while it dies young, up to 2 s),
 * writing fl-bfd.state beside FEED ("ENGINE_PID RESTARTS REASON") for `labctl inspect`. The
 * connection stays open across the restart, so bfdd never learns of it: it neither takes the
 * sessions back into its own loop (FRR 8.4's software fallback, which has no socket to hear
 * the peer with, declares them down at once, and BGP with them) nor resends them. The engine
 * keeps each session in fl-bfd.sessions beside FEED whenever it reports a change to bfdd: as
 * bfdd sent it, its state, and what it learned of the peer (discriminator, multiplier,
 * intervals). Its successor reads them back and carries on as an ASIC's BFD offload does
 * through a warm boot: an Up session is Up, sends at once and arms its detection timer, so
 * the peer, which heard nothing for the few tens of milliseconds of the restart, never
 * notices. When bfdd closes the connection (it restarted), the engine exits with
 * EXIT_BFDD_GONE and the supervisor connects afresh; bfdd then sends its sessions anew.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <math.h>
#include <sched.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_NAME "fl-bfd"
#include "fl_engine.h"

#define DP_VERSION 1
#define SINGLE_HOP_PORT 3784
#define ECHO_PORT 3785
#define MULTI_HOP_PORT 4784
#define SOURCE_PORT_FIRST 49152
#define SOURCE_PORT_LAST 65535
#define SLOW_TX_US 1000000u       /* RFC 5880 6.8.3: at least 1 s while the session is not Up */
#define MAX_SESSIONS 4096
#define RECONNECT_NS 100000000LL
#define EXIT_BFDD_GONE 3          /* the engine's: connect to bfdd afresh, do not resume */
#define TICK_MIN_US 1000u
#define TICK_MAX_US 25000u
#define TICK_DIVISOR 4            /* ticks per shortest interval: jitter is whole ticks */
#define MAX_WATCHERS 8
#define RT_PRIORITY 5             /* below fl-impair's 10: the wire it may send over */
#define CONTROL_LEN 24
#define ECHO_LEN 24
#define RX_ROUNDS 8               /* reads a tick gives one session's socket at most */
#define RESTART_FIRST_NS 10000000LL   /* the supervisor's wait before a restart, doubling */
#define RESTART_MAX_NS 2000000000LL   /* while the engine dies within a second of its start */

enum { ECHO_REQUEST, ECHO_REPLY, DP_ADD_SESSION, DP_DELETE_SESSION, BFD_STATE_CHANGE,
       DP_REQUEST_SESSION_COUNTERS, BFD_SESSION_COUNTERS };
enum { SESSION_MULTIHOP = 1, SESSION_DEMAND = 2, SESSION_CBIT = 4, SESSION_ECHO = 8,
       SESSION_IPV6 = 16, SESSION_PASSIVE = 32, SESSION_SHUTDOWN = 64 };
enum { ADMIN_DOWN, DOWN, INIT, UP };
enum { DIAG_NONE, DIAG_DETECT_EXPIRED, DIAG_ECHO_FAILED, DIAG_NEIGHBOR_DOWN,
       DIAG_ADMIN_DOWN = 7 };
enum { BIT_POLL = 0x20, BIT_FINAL = 0x10, BIT_CPI = 0x08, BIT_AUTH = 0x04, BIT_DEMAND = 0x02,
       BIT_MULTIPOINT = 0x01 };
static const char *STATE[] = {"AdminDown", "Down", "Init", "Up"};

struct dp_header { uint8_t version, zero; uint16_t type, id, length; } __attribute__((packed));

struct dp_session {                /* DP_ADD_SESSION / DP_DELETE_SESSION */
    uint32_t flags;
    struct in6_addr src, dst;
    uint32_t lid, min_tx, min_rx, min_echo_tx, min_echo_rx, hold_time;
    uint8_t ttl, detect_mult;
    uint16_t zero;
    uint32_t ifindex;
    char ifname[64];
} __attribute__((packed));

struct dp_state_change {
    uint32_t lid, rid, remote_flags, desired_tx, required_rx, required_echo_rx;
    uint8_t state, diagnostics, detection_multiplier, pad;
} __attribute__((packed));

struct dp_counters {               /* not packed in bfdd: the counters are 8-byte aligned */
    uint32_t lid, pad;
    uint64_t ctl_in_bytes, ctl_in_pkts, ctl_out_bytes, ctl_out_pkts;
    uint64_t echo_in_bytes, echo_in_pkts, echo_out_bytes, echo_out_pkts;
} __attribute__((packed));

struct control {                  /* RFC 5880 4.1, network byte order */
    uint8_t version_diag, state_bits, detect_mult, length;
    uint32_t my_discr, your_discr, desired_tx, required_rx, required_echo_rx;
} __attribute__((packed));

struct echo {                     /* as bfdd's own echo packets */
    uint8_t version, length;
    uint16_t reserved;
    uint32_t my_discr;
    uint64_t sent_sec, sent_usec;
} __attribute__((packed));

struct session {
    int used;
    struct dp_session cfg;        /* host byte order, as bfdd last sent it */
    int family;
    uint8_t state, diag;          /* local */
    int64_t changed_wall;         /* the tick the state last changed on, CLOCK_REALTIME ns */
    uint32_t rid;                 /* remote discriminator */
    uint8_t rstate, rdiag, rmult, rflags;
    uint32_t r_desired_tx, r_required_rx, r_required_echo_rx;
    int poll, final;              /* Poll sequence running; a Final owed to the peer */
    int64_t next_tx, detect_at, next_echo, echo_detect_at;  /* ns, 0 = not armed */
    struct dp_session wire;       /* as bfdd sent it, for fl-bfd.sessions */
    int sock, echo_sock;
    int rx_sock;                  /* connected to the peer's source port, see connect_rx */
    uint16_t rx_port;             /* that port (network order), 0 = none tried */
    uint32_t self4;               /* our IPv4 address on the session: echo goes to it */
    unsigned char peer_mac[ETH_ALEN];
    int peer_mac_known;
    uint64_t ctl_in[2], ctl_out[2], echo_in[2];  /* packets, bytes */
    uint64_t echo_out;                            /* packets (send_counters) */
};

static struct session sessions[MAX_SESSIONS];
static int nsessions;
static int dplane = -1;
static int rx_socks[4] = {-1, -1, -1, -1};  /* listening: single hop v4/v6, multihop v4/v6 */
static int rx_ready = -1;                    /* epoll over the sessions' rx_sock */
static int64_t tick_ns;
static double tick_jitter;                   /* drawn once a tick, see tx_interval_ns */
static int64_t wall_offset;                  /* CLOCK_REALTIME - CLOCK_MONOTONIC, see arrival */
static unsigned next_port = SOURCE_PORT_FIRST;
static volatile sig_atomic_t stop;
static char sessions_path[PATH_MAX];         /* fl-bfd.sessions beside the feed */
static int feed = -1;
static int watchers[MAX_WATCHERS] = {-1, -1, -1, -1, -1, -1, -1, -1};

/* Kernel receive stamps are wall-clock time; the offset, taken at each wake-up, puts them on
 * the engine's monotonic clock. */
static void take_wall_offset(int64_t now) {
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    wall_offset = ns_of(&wall) - now;
}

/* When a packet arrived, from its SO_TIMESTAMPNS control message; `fallback` without one. */
static int64_t arrival(struct msghdr *m, int64_t fallback) {
    for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h))
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(h), sizeof(ts));
            return ns_of(&ts) - wall_offset;
        }
    return fallback;
}

static const char *peer_str(const struct session *s, char *buf, size_t len) {
    inet_ntop(s->family, s->family == AF_INET6 ? (const void *)&s->cfg.dst
              : (const void *)&s->cfg.dst.s6_addr32[0], buf, (socklen_t)len);
    return buf;
}

/* One feed message to every watcher; a watcher that cannot take it is dropped (it connects
 * again and gets every session anew). It ends with the wall-clock microsecond of the tick
 * the state changed on: when the timers judged it, however late this process then ran. */
static void tell(int only, const struct session *s, const char *what) {
    char peer[INET6_ADDRSTRLEN], line[180];
    int n = snprintf(line, sizeof(line), "%s %d %s %s %lld",
                     s->cfg.ifname[0] ? s->cfg.ifname : "-", s->family == AF_INET6 ? 6 : 4,
                     peer_str(s, peer, sizeof(peer)), what, (long long)(s->changed_wall / 1000));
    for (int i = 0; i < MAX_WATCHERS; i++) {
        int fd = only >= 0 ? only : watchers[i];
        if (fd >= 0 && send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            close(fd);
            for (int j = 0; j < MAX_WATCHERS; j++)
                if (watchers[j] == fd)
                    watchers[j] = -1;
        }
        if (only >= 0)
            return;
    }
}

static const char *feed_state(const struct session *s) { return s->state == UP ? "up" : "down"; }

static struct session *by_lid(uint32_t lid) {
    for (int i = 0; i < nsessions; i++)
        if (sessions[i].used && sessions[i].cfg.lid == lid)
            return &sessions[i];
    return NULL;
}

/* -- the data-plane protocol with bfdd ------------------------------------------------------ */

static void dp_send(uint16_t type, uint16_t id, const void *payload, size_t len) {
    unsigned char buf[512];
    struct dp_header h = {DP_VERSION, 0, htons(type), htons(id),
                          htons((uint16_t)(sizeof(h) + len))};
    memcpy(buf, &h, sizeof(h));
    memcpy(buf + sizeof(h), payload, len);
    if (dplane >= 0 && send(dplane, buf, sizeof(h) + len, MSG_NOSIGNAL) < 0)
        fprintf(stderr, "fl-bfd: write to bfdd: %s\n", strerror(errno));
}

static void keep_sessions(void);

static void report(struct session *s) {
    keep_sessions();
    struct dp_state_change c = {
        htonl(s->cfg.lid), htonl(s->rid),
        htonl((s->rflags & BIT_CPI ? 1 : 0) | (s->rflags & BIT_DEMAND ? 2 : 0)),
        htonl(s->r_desired_tx), htonl(s->r_required_rx), htonl(s->r_required_echo_rx),
        s->state, s->rdiag, s->rmult, 0};
    dp_send(BFD_STATE_CHANGE, 0, &c, sizeof(c));
}

/* -- sessions -------------------------------------------------------------------------------- */

static int single_hop(const struct session *s) { return !(s->cfg.flags & SESSION_MULTIHOP); }

static uint32_t advertised_tx(const struct session *s) {
    return s->state == UP || s->cfg.min_tx > SLOW_TX_US ? s->cfg.min_tx : SLOW_TX_US;
}

static int echo_active(const struct session *s) {
    return (s->cfg.flags & SESSION_ECHO) && s->family == AF_INET && single_hop(s)
           && s->state == UP && s->cfg.min_echo_tx && s->r_required_echo_rx && s->echo_sock >= 0;
}

/* RFC 5880 6.8.7: 0-25% jitter below the interval (10-25% with a multiplier of 1), rounded
 * to whole ticks, since packets leave on ticks: a quarter-interval tick sends after 3 or 4
 * ticks, 87.5% of the interval on average as with continuous jitter. The draw is the tick's,
 * shared by every session sending on it: each packet is jittered, and sessions that once send
 * together keep doing so (the engine wakes for all). */
static int64_t jittered_ns(const struct session *s, uint32_t us) {
    double cut = (s->cfg.detect_mult == 1 ? 0.10 : 0.0) + tick_jitter * 0.25;
    if (cut > 0.25)
        cut = 0.25;
    int64_t ticks = llround(us * (1.0 - cut) * 1000.0 / (double)tick_ns);
    return (ticks < 1 ? 1 : ticks) * tick_ns;
}

static int64_t tx_interval_ns(const struct session *s) {
    uint32_t us = advertised_tx(s);
    return jittered_ns(s, s->r_required_rx > us ? s->r_required_rx : us);
}

static int64_t detect_ns(const struct session *s) {
    uint32_t us = s->cfg.min_rx > s->r_desired_tx ? s->cfg.min_rx : s->r_desired_tx;
    return (int64_t)s->rmult * us * 1000LL;
}

static uint32_t echo_interval_us(const struct session *s) {
    return s->cfg.min_echo_tx > s->r_required_echo_rx ? s->cfg.min_echo_tx
                                                      : s->r_required_echo_rx;
}

static void set_state(struct session *s, uint8_t state, uint8_t diag, int64_t now) {
    char peer[INET6_ADDRSTRLEN];
    if (s->state == state)
        return;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("%lld.%03ld session %" PRIu32 " peer %s %s: %s -> %s (diag %u)\n",
           (long long)wall.tv_sec, wall.tv_nsec / 1000000, s->cfg.lid,
           peer_str(s, peer, sizeof(peer)), s->cfg.ifname, STATE[s->state], STATE[state], diag);
    fflush(stdout);
    int was_up = s->state == UP;
    s->state = state;
    s->diag = diag;
    if (!wall_offset)   /* before the first tick */
        take_wall_offset(now);
    s->changed_wall = (tick_ns ? now - now % tick_ns : now) + wall_offset;
    if (state == UP || was_up)
        s->poll = 1;  /* the advertised transmit interval changes: tell the peer (6.8.3) */
    if (state != UP)
        s->next_echo = s->echo_detect_at = 0;
    if (state == DOWN || state == ADMIN_DOWN) {
        s->detect_at = 0;
        if (state == ADMIN_DOWN || diag == DIAG_DETECT_EXPIRED)
            s->rid = 0;
    }
    s->next_tx = now;  /* a state change goes out at once */
    report(s);
    if (was_up || state == UP)
        tell(-1, s, feed_state(s));
}

/* A socket address of `family` for `addr` (IPv4 in its first word) and `port` (network
 * order), a link-local one scoped to `ifindex`; its length. */
static socklen_t socket_address(int family, struct in6_addr addr, uint16_t port,
                                uint32_t ifindex, struct sockaddr_storage *out) {
    memset(out, 0, sizeof(*out));
    if (family == AF_INET) {
        struct sockaddr_in *a = (void *)out;
        a->sin_family = AF_INET;
        a->sin_port = port;
        a->sin_addr.s_addr = addr.s6_addr32[0];
        return sizeof(*a);
    }
    struct sockaddr_in6 *a = (void *)out;
    a->sin6_family = AF_INET6;
    a->sin6_port = port;
    a->sin6_addr = addr;
    a->sin6_scope_id = ifindex;  /* the kernel reads it for a link-local address only */
    return sizeof(*a);
}

/* A single hop's sockets stay on its interface; 0 when done or not needed. */
static int bind_interface(const struct session *s, int fd) {
    if (!single_hop(s) || !s->cfg.ifname[0])
        return 0;
    return setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, s->cfg.ifname,
                      (socklen_t)strlen(s->cfg.ifname));
}

/* A UDP socket that reports each packet's TTL and interface (the checks of RFC 5881 5) and
 * when it arrived. */
static int rx_socket(int family) {
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int on = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
    if (family == AF_INET) {
        setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
    } else {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
    }
    return fd;
}

static int open_rx_socket(int family, uint16_t port) {
    int fd = rx_socket(family);
    if (fd < 0)
        return -1;
    struct sockaddr_storage a;
    socklen_t len = socket_address(family, in6addr_any, htons(port), 0, &a);
    if (bind(fd, (struct sockaddr *)&a, len) < 0) {
        fprintf(stderr, "fl-bfd: cannot listen on %s port %u: %s\n",
                family == AF_INET ? "IPv4" : "IPv6", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* The session's socket: bound to a source port of its own (and to its interface on a single
 * hop), connected to the peer; it also tells the session its own IPv4 address. */
static int open_tx_socket(struct session *s) {
    int fd = socket(s->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int ttl = 255;
    if (s->family == AF_INET)
        setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
    else
        setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof(ttl));
    if (bind_interface(s, fd) < 0)
        goto fail;
    struct sockaddr_storage local, peer;
    socklen_t len = socket_address(s->family, s->cfg.src, 0, s->cfg.ifindex, &local);
    socket_address(s->family, s->cfg.dst, htons(single_hop(s) ? SINGLE_HOP_PORT : MULTI_HOP_PORT),
                   s->cfg.ifindex, &peer);
    /* RFC 5881 4: a source port in 49152-65535, unique per session. */
    for (unsigned tries = 0; tries <= SOURCE_PORT_LAST - SOURCE_PORT_FIRST; tries++) {
        unsigned port = next_port++;
        if (next_port > SOURCE_PORT_LAST)
            next_port = SOURCE_PORT_FIRST;
        ((struct sockaddr_in *)&local)->sin_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr *)&local, len) == 0)
            break;
        if (errno != EADDRINUSE)
            goto fail;
    }
    if (connect(fd, (struct sockaddr *)&peer, len) < 0)
        goto fail;
    struct sockaddr_in bound;  /* the source the kernel chose when bfdd named none */
    socklen_t blen = sizeof(bound);
    if (s->family == AF_INET && getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        s->self4 = bound.sin_addr.s_addr;
    return fd;
fail:
    close(fd);
    return -1;
}

/* bfdd names no interface for a session a client (bgpd) created with addresses only; a single
 * hop's interface is the one holding our own address, and echo needs to know it. */
static void learn_interface(struct session *s) {
    struct ifaddrs *all, *a;
    if (s->cfg.ifindex || !single_hop(s) || getifaddrs(&all) < 0)
        return;
    for (a = all; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != s->family)
            continue;
        int match = s->family == AF_INET
            ? ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr == s->self4
            : !memcmp(&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr, &s->cfg.src, 16);
        if (match) {
            snprintf(s->cfg.ifname, sizeof(s->cfg.ifname), "%s", a->ifa_name);
            s->cfg.ifindex = if_nametoindex(a->ifa_name);
            break;
        }
    }
    freeifaddrs(all);
}

/* Echo packets are sent to our own address through the peer's MAC, so they come back only
 * if the peer forwards them: a packet socket sends them and, with a filter for UDP to the echo
 * port, takes them back before the IP layer (which drops a packet with our own source). */
static int open_echo_socket(const struct session *s) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),                 /* protocol */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 6),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6),                 /* fragment offset */
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 4, 0),
        BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),                /* header length */
        BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),                 /* UDP destination port */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ECHO_PORT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffff),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
    int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_IP));
    int on = 1;
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0
        || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) < 0
        || packet_bind(fd, (int)s->cfg.ifindex, ETH_P_IP) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The echo socket once the session's interface is known (bfdd may not name it). */
static void prepare_echo(struct session *s) {
    if (!(s->cfg.flags & SESSION_ECHO) || s->family != AF_INET || s->echo_sock >= 0)
        return;
    learn_interface(s);
    if (s->cfg.ifindex)
        s->echo_sock = open_echo_socket(s);
}

static void close_session(struct session *s) {
    tell(-1, s, "gone");
    if (s->sock >= 0)
        close(s->sock);
    if (s->echo_sock >= 0)
        close(s->echo_sock);
    if (s->rx_sock >= 0)
        close(s->rx_sock);
    s->used = 0;
}

static void add_session(const struct dp_session *wire, int64_t now) {
    struct dp_session c = *wire;
    c.flags = ntohl(c.flags);
    c.lid = ntohl(c.lid);
    c.min_tx = ntohl(c.min_tx);
    c.min_rx = ntohl(c.min_rx);
    c.min_echo_tx = ntohl(c.min_echo_tx);
    c.min_echo_rx = ntohl(c.min_echo_rx);
    c.hold_time = ntohl(c.hold_time);
    c.ifindex = ntohl(c.ifindex);
    c.ifname[sizeof(c.ifname) - 1] = 0;
    struct session *s = by_lid(c.lid);
    if (s) {  /* an update: new timers or flags on a running session */
        s->wire = *wire;
        int timers = s->cfg.min_tx != c.min_tx || s->cfg.min_rx != c.min_rx
                     || s->cfg.min_echo_rx != c.min_echo_rx;
        int shutdown = c.flags & SESSION_SHUTDOWN, was = s->cfg.flags & SESSION_SHUTDOWN;
        if (!c.ifindex) {  /* keep the interface learned from our own address */
            c.ifindex = s->cfg.ifindex;
            memcpy(c.ifname, s->cfg.ifname, sizeof(c.ifname));
        }
        s->cfg = c;
        if (timers && s->state == UP)
            s->poll = 1;
        if (shutdown && !was)
            set_state(s, ADMIN_DOWN, DIAG_ADMIN_DOWN, now);
        else if (!shutdown && was)
            set_state(s, DOWN, DIAG_NONE, now);
        prepare_echo(s);
        return;
    }
    for (int i = 0; i < MAX_SESSIONS && !s; i++)
        if (!sessions[i].used)
            s = &sessions[i];
    if (!s) {
        fprintf(stderr, "fl-bfd: more than %d sessions; session %" PRIu32 " not run\n",
                MAX_SESSIONS, c.lid);
        return;
    }
    if (s - sessions >= nsessions)
        nsessions = (int)(s - sessions) + 1;
    memset(s, 0, sizeof(*s));
    s->used = 1;
    s->cfg = c;
    s->wire = *wire;
    s->family = c.flags & SESSION_IPV6 ? AF_INET6 : AF_INET;
    s->state = c.flags & SESSION_SHUTDOWN ? ADMIN_DOWN : DOWN;
    s->rmult = c.detect_mult;
    s->r_required_rx = 1;  /* RFC 5880 6.8.1: until the peer says otherwise */
    s->echo_sock = s->rx_sock = -1;
    int mh = 2 + (s->family == AF_INET6);  /* multihop's port is opened for the first such */
    if ((c.flags & SESSION_MULTIHOP) && rx_socks[mh] < 0)
        rx_socks[mh] = open_rx_socket(s->family, MULTI_HOP_PORT);
    s->sock = open_tx_socket(s);
    learn_interface(s);  /* the feed names the interface */
    prepare_echo(s);
    s->next_tx = now + (int64_t)c.hold_time * 1000000LL;
}

static void delete_session(const struct dp_session *wire) {
    struct session *s = by_lid(ntohl(wire->lid));
    if (s)
        close_session(s);
}

static void send_counters(uint16_t id, uint32_t lid_be) {
    struct dp_counters c = {.lid = lid_be};
    struct session *s = by_lid(ntohl(lid_be));
    if (s) {
        c.ctl_in_pkts = htobe64(s->ctl_in[0]);
        c.ctl_in_bytes = htobe64(s->ctl_in[1]);
        c.ctl_out_pkts = htobe64(s->ctl_out[0]);
        c.ctl_out_bytes = htobe64(s->ctl_out[1]);
        c.echo_in_pkts = htobe64(s->echo_in[0]);
        c.echo_in_bytes = htobe64(s->echo_in[1]);
        /* bfdd 8.4 shows echo_output_bytes as its echo output packet count
         * (_bfd_dplane_update_session_counters in bfdd/dplane.c) and shows no byte counts:
         * both fields carry the packets, so `show bfd peers counters` is right either way */
        c.echo_out_pkts = c.echo_out_bytes = htobe64(s->echo_out);
    }
    dp_send(BFD_SESSION_COUNTERS, id, &c, sizeof(c));
}

struct kept {                     /* a session in fl-bfd.sessions */
    struct dp_session wire;
    uint8_t state, rmult, rflags, pad;
    uint32_t rid, r_desired_tx, r_required_rx, r_required_echo_rx;
};

/* fl-bfd.sessions, replaced whole, for a successor (see the top). */
static void keep_sessions(void) {
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof(tmp), "%s.%d", sessions_path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    for (int i = 0; i < nsessions; i++) {
        const struct session *s = &sessions[i];
        struct kept k = {s->wire, s->state, s->rmult, s->rflags, 0, s->rid, s->r_desired_tx,
                         s->r_required_rx, s->r_required_echo_rx};
        if (s->used)
            fwrite(&k, sizeof(k), 1, f);
    }
    if (fclose(f) == 0)
        rename(tmp, sessions_path);
}

static unsigned char inbuf[65536];
static size_t inlen;

/* Reads what bfdd sent; 0 when the connection is gone. */
static int dp_read(int64_t now) {
    ssize_t n = recv(dplane, inbuf + inlen, sizeof(inbuf) - inlen, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return 0;
    if (n > 0)
        inlen += (size_t)n;
    size_t off = 0;
    while (inlen - off >= sizeof(struct dp_header)) {
        struct dp_header h;
        memcpy(&h, inbuf + off, sizeof(h));
        size_t len = ntohs(h.length);
        if (len < sizeof(h) || h.version != DP_VERSION) {
            fprintf(stderr, "fl-bfd: bad message from bfdd (version %u, length %zu)\n",
                    h.version, len);
            return 0;
        }
        if (inlen - off < len)
            break;
        const unsigned char *body = inbuf + off + sizeof(h);
        size_t blen = len - sizeof(h);
        uint16_t type = ntohs(h.type);
        if ((type == DP_ADD_SESSION || type == DP_DELETE_SESSION)
            && blen >= sizeof(struct dp_session)) {
            struct dp_session wire;
            memcpy(&wire, body, sizeof(wire));
            if (type == DP_ADD_SESSION)
                add_session(&wire, now);
            else
                delete_session(&wire);
            keep_sessions();
        } else if (type == DP_REQUEST_SESSION_COUNTERS && blen >= 4) {
            uint32_t lid;
            memcpy(&lid, body, 4);
            send_counters(ntohs(h.id), lid);
        }
        off += len;
    }
    memmove(inbuf, inbuf + off, inlen - off);
    inlen -= off;
    return 1;
}

/* A successor on its predecessor's connection: its sessions as they were (see the top). */
static void resume_sessions(int64_t now) {
    FILE *f = fopen(sessions_path, "r");
    struct kept k;
    int n = 0, up = 0;
    while (f && fread(&k, sizeof(k), 1, f) == 1) {
        add_session(&k.wire, now);
        struct session *s = by_lid(ntohl(k.wire.lid));
        if (!s || s->state == ADMIN_DOWN)
            continue;
        n++;
        s->state = k.state;
        s->rid = k.rid;
        s->rmult = k.rmult;
        s->rflags = k.rflags;
        s->r_desired_tx = k.r_desired_tx;
        s->r_required_rx = k.r_required_rx;
        s->r_required_echo_rx = k.r_required_echo_rx;
        s->next_tx = now;
        if (s->state == UP || s->state == INIT)
            s->detect_at = now + detect_ns(s);
        up += s->state == UP;
    }
    if (f)
        fclose(f);
    printf("resumed %d session(s) on the connection to bfdd, %d up\n", n, up);
}

static int connect_bfdd(const char *path) {
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);  /* inherited by each engine: no CLOEXEC */
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct timeval tv = {1, 0};  /* a stalled bfdd does not stall the packets for long */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    printf("connected to bfdd at %s\n", path);
    fflush(stdout);
    return fd;
}

/* -- packets --------------------------------------------------------------------------------- */

static void send_control(struct session *s) {
    if (s->sock < 0) {
        if ((s->sock = open_tx_socket(s)) < 0)
            return;
        learn_interface(s);
    }
    prepare_echo(s);
    struct control c = {
        (1 << 5) | (s->diag & 0x1f),
        (uint8_t)(s->state << 6) | (s->final ? BIT_FINAL : (s->poll ? BIT_POLL : 0))
            | (s->cfg.flags & SESSION_CBIT ? BIT_CPI : 0),
        s->cfg.detect_mult, CONTROL_LEN, htonl(s->cfg.lid), htonl(s->rid),
        htonl(advertised_tx(s)), htonl(s->cfg.min_rx),
        htonl(s->cfg.flags & SESSION_ECHO ? s->cfg.min_echo_rx : 0)};
    if (send(s->sock, &c, sizeof(c), 0) == (ssize_t)sizeof(c)) {
        s->ctl_out[0]++;
        s->ctl_out[1] += sizeof(c);
        s->final = 0;
    } else if (errno != EAGAIN && errno != ENOBUFS) {
        close(s->sock);  /* e.g. the address went away: open again next time */
        s->sock = -1;
    }
}

static int learn_peer_mac(struct session *s) {
    struct arpreq req = {0};
    struct sockaddr_in *pa = (void *)&req.arp_pa;
    pa->sin_family = AF_INET;
    memcpy(&pa->sin_addr, &s->cfg.dst.s6_addr32[0], 4);
    snprintf(req.arp_dev, sizeof(req.arp_dev), "%s", s->cfg.ifname);
    if (ioctl(s->sock, SIOCGARP, &req) < 0 || !(req.arp_flags & ATF_COM))
        return 0;
    memcpy(s->peer_mac, req.arp_ha.sa_data, ETH_ALEN);
    return s->peer_mac_known = 1;
}

static uint16_t ip_checksum(const void *data, size_t len) {
    const uint16_t *w = data;
    uint32_t sum = 0;
    for (; len > 1; len -= 2)
        sum += *w++;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void send_echo(struct session *s) {
    if (!s->self4 || (!s->peer_mac_known && !learn_peer_mac(s)))
        return;
    struct {
        struct iphdr ip;
        struct udphdr udp;
        struct echo echo;
    } __attribute__((packed)) p = {0};
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint32_t self = s->self4;
    p.ip.version = 4;
    p.ip.ihl = 5;
    p.ip.tos = 0xc0;  /* network control, as bfdd sends */
    p.ip.tot_len = htons(sizeof(p));
    p.ip.ttl = 255;
    p.ip.protocol = IPPROTO_UDP;
    p.ip.saddr = p.ip.daddr = self;
    p.ip.check = ip_checksum(&p.ip, sizeof(p.ip));
    p.udp.source = htons(ECHO_PORT);
    p.udp.dest = htons(ECHO_PORT);
    p.udp.len = htons(sizeof(p.udp) + sizeof(p.echo));
    p.echo.version = 1;
    p.echo.length = ECHO_LEN;
    p.echo.my_discr = htonl(s->cfg.lid);
    p.echo.sent_sec = htobe64((uint64_t)ts.tv_sec);
    p.echo.sent_usec = htobe64((uint64_t)ts.tv_nsec / 1000);
    struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
                             .sll_ifindex = (int)s->cfg.ifindex, .sll_halen = ETH_ALEN};
    memcpy(to.sll_addr, s->peer_mac, ETH_ALEN);
    if (sendto(s->echo_sock, &p, sizeof(p), 0, (struct sockaddr *)&to, sizeof(to)) > 0) {
        s->echo_out++;
    }
}

/* Reads the echo packets back; `at`: when one came if the kernel does not say. */
static void drain_echo(struct session *s, int64_t at) {
    unsigned char buf[256], cbuf[64];
    struct sockaddr_ll from;
    for (;;) {
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr m = {&from, sizeof(from), &iov, 1, cbuf, sizeof(cbuf), 0};
        ssize_t n = recvmsg(s->echo_sock, &m, MSG_DONTWAIT);
        if (n < 0)
            return;
        if (from.sll_pkttype == PACKET_OUTGOING || n < (ssize_t)(sizeof(struct iphdr) + 8 + 8))
            continue;
        const struct iphdr *ip = (const void *)buf;
        size_t hl = (size_t)ip->ihl * 4;
        uint32_t self = s->self4;
        if (!self || ip->saddr != self || ip->daddr != self || (size_t)n < hl + 8 + 8)
            continue;
        struct echo e;
        memcpy(&e, buf + hl + 8, 8);
        if (ntohl(e.my_discr) != s->cfg.lid)
            continue;
        s->echo_in[0]++;
        s->echo_in[1] += (uint64_t)n;
        if (echo_active(s))
            s->echo_detect_at = arrival(&m, at)
                                + s->cfg.detect_mult * (echo_interval_us(s) * 1000LL);
    }
}

/* The session a valid packet is for, after running its state machine; NULL if discarded. */
static struct session *receive_control(const struct control *c, const struct in6_addr *peer,
                                       int family, uint32_t ifindex, int ttl, int multihop,
                                       int64_t now) {
    if (c->version_diag >> 5 != 1 || c->length < CONTROL_LEN || c->detect_mult == 0
        || (c->state_bits & BIT_MULTIPOINT) || c->my_discr == 0)
        return NULL;
    struct session *s = NULL;
    if (c->your_discr)
        s = by_lid(ntohl(c->your_discr));
    else if ((c->state_bits >> 6) == DOWN || (c->state_bits >> 6) == ADMIN_DOWN) {
        for (int i = 0; i < nsessions && !s; i++) {
            struct session *t = &sessions[i];
            if (t->used && t->family == family && !memcmp(&t->cfg.dst, peer, sizeof(*peer))
                && !!(t->cfg.flags & SESSION_MULTIHOP) == multihop
                && (multihop || !t->cfg.ifindex || t->cfg.ifindex == ifindex))
                s = t;
        }
    }
    if (!s || !!(s->cfg.flags & SESSION_MULTIHOP) != multihop)
        return NULL;
    /* RFC 5881 5 / 5883 2: single hop only from a neighbour (TTL 255); multihop as set. */
    if (ttl >= 0 && ((!multihop && ttl != 255) || (multihop && ttl < s->cfg.ttl)))
        return NULL;
    if (c->state_bits & BIT_AUTH)
        return NULL;  /* no authentication configured on any session bfdd sends here */
    s->ctl_in[0]++;
    s->ctl_in[1] += c->length;
    uint8_t rstate = c->state_bits >> 6;
    s->rid = ntohl(c->my_discr);
    s->rstate = rstate;
    s->rdiag = c->version_diag & 0x1f;
    s->rmult = c->detect_mult;
    s->rflags = c->state_bits;
    uint32_t desired_tx = ntohl(c->desired_tx), required_rx = ntohl(c->required_rx);
    uint32_t echo_rx = ntohl(c->required_echo_rx);
    int timers_changed = desired_tx != s->r_desired_tx || required_rx != s->r_required_rx
                         || echo_rx != s->r_required_echo_rx;
    s->r_desired_tx = desired_tx;
    s->r_required_rx = required_rx;
    s->r_required_echo_rx = echo_rx;
    if ((c->state_bits & BIT_FINAL) && s->poll)
        s->poll = 0;
    if (s->state != DOWN || rstate != ADMIN_DOWN)
        s->detect_at = now + detect_ns(s);
    if (c->state_bits & BIT_POLL) {
        s->final = 1;
        s->next_tx = now;
    }
    if (s->state == ADMIN_DOWN)
        return s;
    if (rstate == ADMIN_DOWN) {
        if (s->state != DOWN)
            set_state(s, DOWN, DIAG_NEIGHBOR_DOWN, now);
    } else if (s->state == DOWN) {
        if (rstate == DOWN)
            set_state(s, INIT, DIAG_NONE, now);
        else if (rstate == INIT)
            set_state(s, UP, DIAG_NONE, now);
    } else if (s->state == INIT) {
        if (rstate == INIT || rstate == UP)
            set_state(s, UP, DIAG_NONE, now);
    } else if (rstate == DOWN) {
        set_state(s, DOWN, DIAG_NEIGHBOR_DOWN, now);
    } else if (timers_changed) {
        report(s);  /* bfdd shows the peer's intervals (a Poll changes them once Up) */
    }
    if (echo_active(s) && !s->next_echo)
        s->next_echo = now;  /* detection starts with the first echo back, as in bfdd */
    return s;
}

/* A socket of the session's own, bound to its address and port and connected to the port the
 * peer sends from. The kernel's UDP early demux finds a connected socket before routing and
 * keeps its route, so the session's packets skip the input route lookup (at fpf-64 the
 * engine's idle CPU fell 4-16% in three paired windows), and epoll names the sockets that
 * hold a packet. A packet from another source port (the peer's session restarted) reaches the
 * listening socket again, which moves the session over to it. Without the socket the
 * listening one serves. */
static void connect_rx(struct session *s, const struct sockaddr_storage *from) {
    uint16_t port = s->family == AF_INET ? ((const struct sockaddr_in *)from)->sin_port
                                         : ((const struct sockaddr_in6 *)from)->sin6_port;
    if (port == s->rx_port)
        return;  /* connected to it, or tried and failed: the listening socket serves */
    s->rx_port = port;
    if (s->rx_sock >= 0)
        close(s->rx_sock);
    int fd = s->rx_sock = rx_socket(s->family);
    if (fd < 0)
        return;
    struct in6_addr self = s->cfg.src;
    if (s->family == AF_INET && !self.s6_addr32[0])
        self.s6_addr32[0] = s->self4;  /* bfdd named none: the one the kernel chose */
    struct sockaddr_storage local;
    socklen_t len = socket_address(s->family, self,
                                   htons(single_hop(s) ? SINGLE_HOP_PORT : MULTI_HOP_PORT),
                                   s->cfg.ifindex, &local);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    if (bind_interface(s, fd) < 0
        || bind(fd, (struct sockaddr *)&local, len) < 0
        || connect(fd, (const struct sockaddr *)from, len) < 0
        || epoll_ctl(rx_ready, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        s->rx_sock = -1;
    }
}

/* Reads one packet from fd into the state machine; 0 when fd held none. `listening`: fd is a
 * listening socket, whose sessions get a connected socket of their own; `at`: when the packet
 * came if the kernel does not say. */
static int receive(int fd, int family, int multihop, int listening, int64_t at) {
    unsigned char buf[128], cbuf[256];
    struct sockaddr_storage from;
    struct iovec iov = {buf, sizeof(buf)};
    struct msghdr m = {&from, sizeof(from), &iov, 1, cbuf, sizeof(cbuf), 0};
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    if (n < 0)
        return 0;
    if (n < CONTROL_LEN)
        return 1;
    int ttl = -1;
    uint32_t ifindex = 0;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level == IPPROTO_IP && h->cmsg_type == IP_TTL)
            ttl = *(int *)CMSG_DATA(h);
        else if (h->cmsg_level == IPPROTO_IP && h->cmsg_type == IP_PKTINFO)
            ifindex = (uint32_t)((struct in_pktinfo *)CMSG_DATA(h))->ipi_ifindex;
        else if (h->cmsg_level == IPPROTO_IPV6 && h->cmsg_type == IPV6_HOPLIMIT)
            ttl = *(int *)CMSG_DATA(h);
        else if (h->cmsg_level == IPPROTO_IPV6 && h->cmsg_type == IPV6_PKTINFO)
            ifindex = ((struct in6_pktinfo *)CMSG_DATA(h))->ipi6_ifindex;
    }
    struct in6_addr peer = {0};
    if (family == AF_INET)
        memcpy(&peer.s6_addr32[0], &((struct sockaddr_in *)&from)->sin_addr, 4);
    else
        peer = ((struct sockaddr_in6 *)&from)->sin6_addr;
    struct control c;
    memcpy(&c, buf, sizeof(c));
    struct session *s = receive_control(&c, &peer, family, ifindex, ttl, multihop,
                                        arrival(&m, at));
    if (s && listening)
        connect_rx(s, &from);
    return 1;
}

/* -- one tick -------------------------------------------------------------------------------- */

/* A passive session waits for the peer's first packet (RFC 5880 6.1); none goes to a peer
 * that asked for none (RequiredMinRxInterval 0) unless a Final is owed. */
static int sends(const struct session *s) {
    int passive_wait = (s->cfg.flags & SESSION_PASSIVE) && !s->rid;
    return !passive_wait && (s->r_required_rx || s->final);
}

static int detecting(const struct session *s) {
    return s->detect_at && (s->state == INIT || s->state == UP);
}

static int echo_detecting(const struct session *s) { return s->echo_detect_at && s->state == UP; }

/* Drains every socket, expires detection timers, then sends what falls due before the middle
 * of the next tick (so an interval of k ticks is k ticks, not k + 1). */
static void tick(int64_t now) {
    static const int family[4] = {AF_INET, AF_INET6, AF_INET, AF_INET6};
    int64_t due = now + tick_ns / 2;
    /* A packet the kernel did not stamp counts as come at the tick's own instant. */
    int64_t at = now - now % tick_ns;
    take_wall_offset(now);
    tick_jitter = drand48();
    for (int i = 0; i < 4; i++)
        while (rx_socks[i] >= 0 && receive(rx_socks[i], family[i], i >= 2, 1, at))
            ;
    /* A session's socket holds about one packet a tick: one read each per round, and a socket
     * that still holds one is ready again in the next round (no read only to find it empty). */
    struct epoll_event ready[256];
    int n;
    for (int round = 0; round < RX_ROUNDS && (n = epoll_wait(rx_ready, ready, 256, 0)) > 0; round++)
        for (int i = 0; i < n; i++) {
            struct session *s = ready[i].data.ptr;
            receive(s->rx_sock, s->family, !single_hop(s), 0, at);
        }
    for (int i = 0; i < nsessions; i++) {
        struct session *s = &sessions[i];
        if (!s->used)
            continue;
        if (s->echo_sock >= 0)
            drain_echo(s, at);
        if (detecting(s) && now >= s->detect_at)
            set_state(s, DOWN, DIAG_DETECT_EXPIRED, now);
        else if (echo_detecting(s) && now >= s->echo_detect_at)
            set_state(s, DOWN, DIAG_ECHO_FAILED, now);
        if (sends(s) && due >= s->next_tx) {
            send_control(s);
            s->next_tx = now + tx_interval_ns(s);
        }
        if (echo_active(s) && s->next_echo && due >= s->next_echo) {
            send_echo(s);
            /* jittered as control packets are (RFC 5880 6.8.9 allows it): without it two
             * echoes lost in a row leave a gap of exactly the detection time, and whether the
             * third comes back before the timer expires is a race */
            s->next_echo = now + jittered_ns(s, echo_interval_us(s));
        }
    }
}

/* The first tick after `now` on which anything falls due, as tick() judges it: a packet to
 * send (on the tick at most half a tick before its time), a detection timer, an echo. 0 when
 * nothing is armed: only bfdd or a watcher can change that, and they wake the engine. While
 * a session comes up, every tick: each step of its three-way handshake answers the peer's
 * packet, which would otherwise wait for the session's next slow (1 s) send to be read. */
static int64_t next_wake(int64_t now) {
    int64_t half = tick_ns / 2, first = (now / tick_ns + 1) * tick_ns, at = INT64_MAX;
    for (int i = 0; i < nsessions; i++) {
        const struct session *s = &sessions[i];
        if (!s->used)
            continue;
        if (s->state == DOWN || s->state == INIT)
            return first;
        if (sends(s) && s->next_tx - half < at)
            at = s->next_tx - half;
        if (detecting(s) && s->detect_at < at)
            at = s->detect_at;
        if (echo_detecting(s) && s->echo_detect_at < at)
            at = s->echo_detect_at;
        if (echo_active(s) && s->next_echo && s->next_echo - half < at)
            at = s->next_echo - half;
    }
    if (at == INT64_MAX)
        return 0;
    return at <= first ? first : (at + tick_ns - 1) / tick_ns * tick_ns;
}

/* A quarter of the shortest interval any session runs (1 ms to 25 ms). */
static int64_t session_tick_ns(uint32_t fixed_us) {
    if (fixed_us)
        return (int64_t)fixed_us * 1000;
    uint32_t shortest = TICK_MAX_US * TICK_DIVISOR;
    for (int i = 0; i < nsessions; i++) {
        const struct session *s = &sessions[i];
        if (!s->used)
            continue;
        if (s->cfg.min_tx && s->cfg.min_tx < shortest)
            shortest = s->cfg.min_tx;
        if (s->cfg.min_rx && s->cfg.min_rx < shortest)
            shortest = s->cfg.min_rx;
        if ((s->cfg.flags & SESSION_ECHO) && s->cfg.min_echo_tx && s->cfg.min_echo_tx < shortest)
            shortest = s->cfg.min_echo_tx;
    }
    uint32_t t = shortest / TICK_DIVISOR;
    return (int64_t)(t < TICK_MIN_US ? TICK_MIN_US : t > TICK_MAX_US ? TICK_MAX_US : t) * 1000;
}

static int open_feed(const char *path) {
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 4) < 0) {
        fprintf(stderr, "fl-bfd: cannot serve the feed at %s: %s\n", path, strerror(errno));
        return -1;
    }
    return fd;
}

/* A new watcher gets every session's state; a watcher's hang-up frees its place. */
static void serve_feed(const struct pollfd *p, int n) {
    for (int i = 0; i < n; i++) {
        if (!p[i].revents || p[i].fd == dplane)
            continue;
        if (p[i].fd == feed) {
            int fd = accept4(feed, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            int slot = 0;
            while (slot < MAX_WATCHERS && watchers[slot] >= 0)
                slot++;
            if (fd >= 0 && slot == MAX_WATCHERS)
                close(fd);
            else if (fd >= 0) {
                watchers[slot] = fd;
                for (int j = 0; j < nsessions; j++)
                    if (sessions[j].used)
                        tell(fd, &sessions[j], feed_state(&sessions[j]));
            }
            continue;
        }
        char drain[64];
        if (recv(p[i].fd, drain, sizeof(drain), MSG_DONTWAIT) <= 0)
            for (int j = 0; j < MAX_WATCHERS; j++)
                if (watchers[j] == p[i].fd) {
                    close(watchers[j]);
                    watchers[j] = -1;
                }
    }
}

static void on_signal(int sig) { (void)sig; stop = 1; }

/* -- the supervisor -------------------------------------------------------------------------- */

static volatile pid_t engine_pid;

static void pass_on(int sig) {
    stop = 1;
    if (engine_pid > 0)
        kill(engine_pid, sig);
}

/* FEED's directory /fl-bfd.state: "ENGINE_PID RESTARTS REASON", replaced whole. */
static void write_state(const char *feed_path, pid_t pid, int restarts, const char *reason) {
    char path[PATH_MAX], tmp[PATH_MAX + 16];
    const char *slash = strrchr(feed_path, '/');
    int dir = slash ? (int)(slash - feed_path) : 1;
    snprintf(path, sizeof(path), "%.*s/fl-bfd.state", dir, slash ? feed_path : ".");
    snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%d %d %s\n", (int)pid, restarts, reason);
    if (fclose(f) == 0)
        rename(tmp, path);
}

/* Connects to bfdd and runs the engine as a child on that connection, starting another when
 * it dies (see the top); returns in the child, with `dplane` its connection, whether it is a
 * successor on a kept connection (which resumes its predecessor's sessions). */
static int supervise(const char *socket_path, const char *feed_path) {
    signal(SIGTERM, pass_on);
    signal(SIGINT, pass_on);
    prctl(PR_SET_NAME, "fl-bfd-watch");  /* `fl-bfd` is the engine's name alone */
    pid_t self = getpid();
    int64_t wait = RESTART_FIRST_NS;
    char reason[64] = "-";
    int conn = -1, kept = 0;
    for (int restarts = 0;; restarts++) {
        while (conn < 0 && !stop) {
            if ((conn = connect_bfdd(socket_path)) < 0)
                nanosleep(&(struct timespec){0, RECONNECT_NS}, NULL);
        }
        if (stop)
            exit(0);
        int64_t started = now_ns();
        pid_t child = fork();
        if (child == 0) {
            prctl(PR_SET_NAME, "fl-bfd");
            prctl(PR_SET_PDEATHSIG, SIGKILL);  /* the supervisor gone, so is its engine */
            if (getppid() != self)
                _exit(1);
            dplane = conn;
            return kept;
        }
        if (child > 0) {
            engine_pid = child;
            write_state(feed_path, child, restarts, reason);
            int status;
            while (waitpid(child, &status, 0) < 0 && errno == EINTR)
                ;
            engine_pid = 0;
            if (stop)
                exit(0);
            kept = !(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_BFDD_GONE);
            if (!kept) {  /* bfdd went away: connect afresh, it sends its sessions anew */
                close(conn);
                conn = -1;
            }
            if (WIFSIGNALED(status))
                snprintf(reason, sizeof(reason), "killed-by-signal-%d", WTERMSIG(status));
            else
                snprintf(reason, sizeof(reason), "exited-%d", WEXITSTATUS(status));
            printf("fl-bfd: engine %d %s; starting another%s\n", (int)child, reason,
                   kept ? " on the same connection to bfdd" : "");
            fflush(stdout);
        }
        if (now_ns() - started > 1000000000LL)
            wait = RESTART_FIRST_NS;
        struct timespec pause = {wait / 1000000000LL, wait % 1000000000LL};
        nanosleep(&pause, NULL);
        if (stop)
            exit(0);
        wait = wait * 2 > RESTART_MAX_NS ? RESTART_MAX_NS : wait * 2;
    }
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: fl-bfd SOCKET FEED [tick_us]\n");
        return 2;
    }
    uint32_t fixed_tick = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 0;
    int resume = supervise(argv[1], argv[2]);
    const char *slash = strrchr(argv[2], '/');
    snprintf(sessions_path, sizeof(sessions_path), "%.*s/fl-bfd.sessions",
             slash ? (int)(slash - argv[2]) : 1, slash ? argv[2] : ".");
    if ((feed = open_feed(argv[2])) < 0)
        return 1;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    srand48(now_ns() ^ getpid());
    /* An ASIC's BFD engine is not slowed by its control plane. Real-time priority puts this
     * one ahead of FRR, the agents and traffic: a deploying fpf-64 keeps both cores busy with
     * a hundred runnable processes, and a normal-priority engine may then wait longer for a
     * CPU than the 300 ms a session may stay silent. */
    struct sched_param sp = {.sched_priority = RT_PRIORITY};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
        fprintf(stderr, "fl-bfd: no real-time priority (%s); a loaded host may flap sessions\n",
                strerror(errno));
    if ((rx_ready = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return 1;
    rx_socks[0] = open_rx_socket(AF_INET, SINGLE_HOP_PORT);
    rx_socks[1] = open_rx_socket(AF_INET6, SINGLE_HOP_PORT);
    if (rx_socks[0] < 0 && rx_socks[1] < 0)
        return 1;
    printf("fl-bfd: data plane for bfdd at %s%s\n", argv[1],
           resume ? " (a successor: resuming its sessions)" : "");
    if (resume)
        resume_sessions(now_ns());
    fflush(stdout);
    while (!stop) {
        int64_t now = now_ns();
        int64_t t = session_tick_ns(fixed_tick);
        if (t != tick_ns) {
            tick_ns = t;
            printf("tick %" PRId64 " us\n", tick_ns / 1000);
            fflush(stdout);
        }
        /* Ticks fall on multiples of the tick, so a lab's engines wake together. */
        int64_t next = next_wake(now);
        int64_t wake = next;
        struct pollfd p[2 + MAX_WATCHERS] = {{feed, POLLIN, 0}};
        int n = 1;
        for (int i = 0; i < MAX_WATCHERS; i++)
            if (watchers[i] >= 0)
                p[n++] = (struct pollfd){watchers[i], POLLIN, 0};
        p[n++] = (struct pollfd){dplane, POLLIN, 0};
        int64_t left = wake > now ? wake - now : 0;
        struct timespec wait = {left / 1000000000LL, left % 1000000000LL};
        int ready = ppoll(p, (nfds_t)n, wake ? &wait : NULL, NULL);
        now = now_ns();
        if (ready > 0)
            serve_feed(p, n);
        if (ready > 0 && p[n - 1].revents && !dp_read(now)) {
            printf("bfdd closed the data-plane connection\n");
            return EXIT_BFDD_GONE;
        }
        if (next && now >= next)
            tick(now);
    }
    return 0;
}
