/* fl-probe: a multi-plane host NIC's data-plane path check, as the NIC itself does it.
 *
 * Every interval the host sends one "round" of probes to every peer host: one UDP packet per
 * plane, to the peer's GPU address with the plane's mark (MARK_BASE + plane), so policy
 * routing sends it down the plane table the sprayed traffic uses: it crosses the same leaf
 * and spine. Rounds are numbered per sender. The receiver takes a probe's plane from the NIC
 * it came in on and ignores one that came in on another plane than it was sent on (its plane
 * table had no route, and the main table sent it elsewhere).
 *
 * The receiver judges each plane against the others, never against the clock: a plane is
 * silent once a round MISSES rounds newer than the last it delivered has arrived on another
 * plane, and lossy once it lost DRAIN more of the last WINDOW rounds than the typical plane
 * (the median) did. A sender or receiver that stalls (a busy CPU) delays every plane alike,
 * and loss every plane suffers (a lossy cable model on every link) raises the median with
 * it: neither drains anything. Only a plane that loses what the others deliver is out, and
 * one plane is always left. A plane is back once a whole WINDOW of rounds has passed with
 * it losing no more than the typical plane.
 *
 * The verdict is about the peer -> me direction, but the peer must act on it (it is the one
 * spraying into the plane), so every probe carries the sender's verdicts on the receiver's
 * planes: "I do not hear you on planes SILENT, I hear you with loss on planes LOSSY", and how
 * many of the receiver's probes it lost per plane in its window. The peer reads them off
 * whichever plane still delivers, one interval later at most. A plane whose probes the peers
 * that still hear it together lost 2 x DRAIN more of than the typical plane's (a gray failure
 * on this host's side of the plane: its NIC, cable or leaf port) is drained towards every
 * destination at once: all peers' counts are evidence, so it is found sooner and with fewer
 * false alarms than one peer's count can. Verdicts older than STALE_ROUNDS rounds (a peer gone
 * quiet on every plane) are dropped: BFD and BGP judge a dead host.
 *
 *   fl-probe PORT INTERVAL_US MISSES WINDOW DRAIN MARK_BASE SOURCE PLANE=IFNAME... -- PEER...
 *
 * On stdout, one line per change of what a peer says about my planes (for the spray agent),
 * PEER being * for a plane drained towards every destination:
 *   PEER PLANE drain silent|loss
 *   PEER PLANE restore
 * On stderr, the engine's own verdicts with wall-clock times (the log).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_NAME "fl-probe"
#include "fl_engine.h"

#define MAGIC 0x464c5052u /* "FLPR" */
#define VERSION 1
#define MAX_PLANES 32
#define MAX_PEERS 1024
#define RING 4096                 /* rounds kept per plane: WINDOW + MISSES must fit */
#define STALE_ROUNDS 200
#define RCVBUF (4 << 20)

struct probe {
    uint32_t magic;
    uint8_t version, plane;
    uint16_t epoch;     /* random per start: a restarted sender's rounds begin anew */
    uint32_t round;
    uint32_t silent, lossy; /* the sender's verdicts on the receiver's planes */
    uint8_t lost[MAX_PLANES]; /* of the receiver's probes, per plane, lost in the window */
} __attribute__((packed));

enum { OK, SILENT, LOSSY };
static const char *VERDICT[] = {"ok", "silent", "loss"};

struct plane_rx {
    uint32_t last;      /* newest round delivered */
    uint16_t lost;      /* in the window */
    uint8_t verdict;
    uint8_t seen[RING]; /* round r delivered: seen[r % RING] */
    uint8_t lost_at[RING];
};

struct peer {
    struct in_addr addr;
    int known;          /* a first round arrived */
    int fresh;          /* probes arrived since it was last judged */
    uint16_t epoch;
    uint32_t first, top, closed;
    struct plane_rx rx[MAX_PLANES];
    uint32_t heard_silent, heard_lossy; /* what the peer says about my planes */
    uint8_t told_lost[MAX_PLANES];      /* and how many of my probes it lost, per plane */
    uint32_t heard_round;               /* my round count when the peer last spoke */
};

static int nplanes, npeers, stop, rx_sock;
static int plane_id[MAX_PLANES], tx_sock[MAX_PLANES];
static unsigned plane_ifindex[MAX_PLANES];
static char plane_if[MAX_PLANES][IF_NAMESIZE];
static struct peer peers[MAX_PEERS];
static uint32_t misses, window, drain, round_no;
static uint8_t everywhere[MAX_PLANES]; /* a plane drained towards every destination */
static uint16_t port, epoch;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "%lld.%03ld ", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* A UDP socket from the host's GPU address (port 0: any), or -1 with errno set. */
static int open_socket(struct in_addr source, uint16_t port_) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port_), .sin_addr = source};
    return fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) ? -1 : fd;
}

/* Every plane's probes arrive here; the ingress NIC (IP_PKTINFO) names the plane. */
static int open_receiver(struct in_addr source) {
    int fd = open_socket(source, port), one = 1, rcvbuf = RCVBUF;
    if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf)) {
        fprintf(stderr, "fl-probe: receive socket: %s\n", strerror(errno));
        return -1;
    }
    return fd;
}

/* A plane's probes leave with its mark, so policy routing takes them down its table. */
static int open_plane(int i, struct in_addr source, uint32_t mark) {
    int fd = open_socket(source, 0);
    if (fd < 0 || !(plane_ifindex[i] = if_nametoindex(plane_if[i])) ||
        setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark)) {
        fprintf(stderr, "fl-probe: plane %d (%s): %s\n", plane_id[i], plane_if[i],
                strerror(errno));
        return -1;
    }
    return fd;
}

static struct peer *peer_of(struct in_addr addr) {
    for (int i = 0; i < npeers; i++)
        if (peers[i].addr.s_addr == addr.s_addr)
            return &peers[i];
    return NULL;
}

/* The lower median of one count per plane: what a healthy plane shows. */
static unsigned typical(const unsigned *count) {
    unsigned sorted[MAX_PLANES];
    for (int i = 0; i < nplanes; i++) {
        int j = i;
        for (; j > 0 && sorted[j - 1] > count[i]; j--)
            sorted[j] = sorted[j - 1];
        sorted[j] = count[i];
    }
    return sorted[(nplanes - 1) / 2];
}

/* What a healthy plane loses of this peer's probes in the window. */
static unsigned typical_loss(const struct peer *p) {
    unsigned lost[MAX_PLANES];
    for (int i = 0; i < nplanes; i++)
        lost[i] = p->rx[i].lost;
    return typical(lost);
}

static void judge(struct peer *p, int i, uint8_t verdict) {
    struct plane_rx *rx = &p->rx[i];
    if (rx->verdict == verdict)
        return;
    logf_("from %s plane %d: %s -> %s (lost %u of the last %u rounds, the typical plane %u)",
          inet_ntoa(p->addr), plane_id[i], VERDICT[rx->verdict], VERDICT[verdict], rx->lost,
          window, typical_loss(p));
    rx->verdict = verdict;
}

/* Round r is closed once MISSES newer rounds arrived: a probe that late is lost. A round
 * no plane delivered says nothing about planes (the sender or this host stalled). */
static void close_round(struct peer *p, uint32_t r) {
    int any = 0;
    for (int i = 0; i < nplanes; i++)
        any |= p->rx[i].seen[r % RING];
    for (int i = 0; i < nplanes; i++) {
        struct plane_rx *rx = &p->rx[i];
        uint8_t lost = any && !rx->seen[r % RING];
        rx->lost += lost;
        rx->lost -= rx->lost_at[r % window];
        rx->lost_at[r % window] = lost;
        rx->seen[r % RING] = 0;
    }
    p->closed = r;
}

static void reset_peer(struct peer *p, uint32_t round, uint16_t epoch_) {
    struct in_addr addr = p->addr;
    memset(p, 0, sizeof *p);
    p->addr = addr;
    p->known = 1;
    p->epoch = epoch_;
    p->first = p->closed = round - 1;
    p->top = round - 1;
    for (int i = 0; i < nplanes; i++)
        p->rx[i].last = round - 1;
    p->heard_round = round_no;
}

static void tell(struct peer *p, uint32_t silent, uint32_t lossy) {
    for (int i = 0; i < nplanes; i++) {
        uint32_t bit = 1u << plane_id[i];
        int was = p->heard_silent & bit ? SILENT : p->heard_lossy & bit ? LOSSY : OK;
        int now = silent & bit ? SILENT : lossy & bit ? LOSSY : OK;
        if (was == now)
            continue;
        if (now == OK)
            printf("%s %d restore\n", inet_ntoa(p->addr), plane_id[i]);
        else
            printf("%s %d drain %s\n", inet_ntoa(p->addr), plane_id[i], VERDICT[now]);
    }
    fflush(stdout);
    p->heard_silent = silent;
    p->heard_lossy = lossy;
}

/* One probe: recorded only. Judging waits until the socket is drained: a backlog (this
 * engine stalled) is judged as a whole. */
static void receive(int i, const struct probe *pr, struct in_addr from) {
    struct peer *p = peer_of(from);
    uint32_t round = ntohl(pr->round);
    if (!p || ntohl(pr->magic) != MAGIC || pr->version != VERSION)
        return;
    /* A peer seen for the first time, restarted, or back after longer than the ring holds
     * starts afresh. */
    if (!p->known || pr->epoch != p->epoch || round - p->closed >= RING - misses)
        reset_peer(p, round, pr->epoch);
    if ((int32_t)(round - p->closed) <= 0)
        return; /* later than MISSES rounds: already counted lost */
    struct plane_rx *rx = &p->rx[i];
    rx->seen[round % RING] = 1;
    if ((int32_t)(round - rx->last) > 0)
        rx->last = round;
    if ((int32_t)(round - p->top) > 0)
        p->top = round;
    p->heard_round = round_no;
    p->fresh = 1;
    for (int j = 0; j < nplanes; j++)
        p->told_lost[j] = pr->lost[plane_id[j]];
    tell(p, ntohl(pr->silent), ntohl(pr->lossy));
}

/* All peers' counts of my probes lost, per plane, against the typical plane's. A peer that
 * does not hear the plane at all is left out: that is its path (a route gone, its leaf),
 * and its own verdict already takes the plane out towards it. */
static void judge_everywhere(void) {
    unsigned total[MAX_PLANES] = {0};
    for (int k = 0; k < npeers; k++)
        for (int i = 0; peers[k].known && i < nplanes; i++)
            if (!(peers[k].heard_silent & 1u << plane_id[i]))
                total[i] += peers[k].told_lost[i];
    unsigned usual = typical(total);
    for (int i = 0; i < nplanes; i++) {
        uint8_t now = total[i] >= usual + 2 * drain ? LOSSY
                      : total[i] <= usual ? OK : everywhere[i];
        if (now == everywhere[i])
            continue;
        logf_("plane %d: %s towards every peer (peers lost %u of my probes, the typical plane %u)",
              plane_id[i], now == LOSSY ? "drained" : "back", total[i], usual);
        printf(now == LOSSY ? "* %d drain loss\n" : "* %d restore\n", plane_id[i]);
        fflush(stdout);
        everywhere[i] = now;
    }
}

static void judge_peer(struct peer *p) {
    while ((int32_t)(p->top - misses - p->closed) > 0)
        close_round(p, p->closed + 1);
    int filled = p->closed - p->first >= window;
    unsigned usual = typical_loss(p);
    for (int j = 0; j < nplanes; j++) {
        struct plane_rx *x = &p->rx[j];
        if (p->top - x->last >= misses)
            judge(p, j, SILENT);
        else if (x->lost >= usual + drain)
            judge(p, j, LOSSY);
        else if (x->verdict != OK && x->lost <= usual && filled)
            judge(p, j, OK);
    }
    p->fresh = 0;
}

static int plane_of_ifindex(unsigned ifindex) {
    for (int i = 0; i < nplanes; i++)
        if (plane_ifindex[i] == ifindex)
            return i;
    return -1;
}

static void drain_socket(void) {
    struct probe pr;
    struct sockaddr_in from;
    char control[CMSG_SPACE(sizeof(struct in_pktinfo))];
    struct iovec iov = {&pr, sizeof pr};
    struct msghdr msg = {&from, sizeof from, &iov, 1, control, sizeof control, 0};
    ssize_t n;
    while ((n = recvmsg(rx_sock, &msg, 0)) >= 0) {
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        int i = c && c->cmsg_type == IP_PKTINFO
                    ? plane_of_ifindex(((struct in_pktinfo *)CMSG_DATA(c))->ipi_ifindex) : -1;
        if (n == (ssize_t)sizeof pr && i >= 0 && pr.plane == plane_id[i])
            receive(i, &pr, from.sin_addr);
        msg.msg_namelen = sizeof from;
        msg.msg_controllen = sizeof control;
    }
    for (int k = 0; k < npeers; k++)
        if (peers[k].fresh)
            judge_peer(&peers[k]);
    judge_everywhere();
}

static void send_round(void) {
    round_no++;
    for (int k = 0; k < npeers; k++) {
        struct peer *p = &peers[k];
        if (p->known && round_no - p->heard_round > STALE_ROUNDS) {
            logf_("%s silent on every plane: its verdicts are dropped", inet_ntoa(p->addr));
            tell(p, 0, 0);
            p->known = 0;
        }
        struct probe pr = {htonl(MAGIC), VERSION, 0, epoch, htonl(round_no), 0, 0, {0}};
        for (int i = 0; p->known && i < nplanes; i++) {
            pr.lost[plane_id[i]] = p->rx[i].lost < 255 ? (uint8_t)p->rx[i].lost : 255;
            if (p->rx[i].verdict == SILENT)
                pr.silent |= 1u << plane_id[i];
            else if (p->rx[i].verdict == LOSSY)
                pr.lossy |= 1u << plane_id[i];
        }
        pr.silent = htonl(pr.silent);
        pr.lossy = htonl(pr.lossy);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr = p->addr};
        for (int i = 0; i < nplanes; i++) {
            pr.plane = (uint8_t)plane_id[i];
            /* ENETUNREACH and friends: the plane has no route there; the peer sees it */
            sendto(tx_sock[i], &pr, sizeof pr, 0, (struct sockaddr *)&to, sizeof to);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 10) {
        fprintf(stderr, "usage: fl-probe PORT INTERVAL_US MISSES WINDOW DRAIN MARK_BASE SOURCE "
                        "PLANE=IFNAME... -- PEER...\n");
        return 2;
    }
    port = (uint16_t)atoi(argv[1]);
    int64_t interval = strtoll(argv[2], NULL, 10) * 1000;
    misses = (uint32_t)atoi(argv[3]);
    window = (uint32_t)atoi(argv[4]);
    drain = (uint32_t)atoi(argv[5]);
    uint32_t mark_base = (uint32_t)strtoul(argv[6], NULL, 0);
    struct in_addr source;
    if (interval <= 0 || misses < 1 || window < 1 || window + misses >= RING / 2 || drain < 1 ||
        !inet_aton(argv[7], &source)) {
        fprintf(stderr, "fl-probe: bad arguments\n");
        return 2;
    }
    int a = 8;
    for (; a < argc && strcmp(argv[a], "--") && nplanes < MAX_PLANES; a++, nplanes++) {
        char *eq = strchr(argv[a], '=');
        if (!eq || (plane_id[nplanes] = atoi(argv[a])) < 0 || plane_id[nplanes] >= MAX_PLANES)
            return fprintf(stderr, "fl-probe: bad plane %s\n", argv[a]), 2;
        snprintf(plane_if[nplanes], IF_NAMESIZE, "%s", eq + 1);
    }
    for (a++; a < argc && npeers < MAX_PEERS; a++)
        if (!inet_aton(argv[a], &peers[npeers++].addr))
            return fprintf(stderr, "fl-probe: bad peer %s\n", argv[a]), 2;
    epoch = (uint16_t)(now_ns() ^ getpid());
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the spray agent's helper: gone with it */
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if ((rx_sock = open_receiver(source)) < 0)
        return 1;
    for (int i = 0; i < nplanes; i++)
        if ((tx_sock[i] = open_plane(i, source, mark_base + (uint32_t)plane_id[i])) < 0)
            return 1;
    logf_("fl-probe: %d planes, %d peers, a round every %" PRId64 " us; silent after %u "
          "rounds, lossy at %u more lost of %u than the typical plane", nplanes, npeers,
          interval / 1000, misses, drain, window);
    struct pollfd p = {rx_sock, POLLIN, 0};
    int64_t next = now_ns();
    while (!stop) {
        int64_t now = now_ns();
        if (now >= next) {
            send_round();
            /* Rounds keep to their grid: a round sent late does not push the later ones back
             * (lateness would add up over the rounds a detection waits for), and rounds missed
             * while the CPU was busy are skipped, not sent in a burst. */
            next += interval;
            if (next <= now)
                next += (now - next) / interval * interval + interval;
        }
        struct timespec wait = {(next - now) / 1000000000LL, (next - now) % 1000000000LL};
        if (ppoll(&p, 1, &wait, NULL) > 0)
            drain_socket();
    }
    return 0;
}
