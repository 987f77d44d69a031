/* fl-port: the egress of a node's ports at line rate, as a switch's MMU and MAC make it.
 *
 * The kernels met here have no RED and no prio qdisc, and none sends or honours 802.1Qbb
 * PAUSE, so this engine does that work. tc redirects a port's egress frames (clsact egress,
 * u32 on the skb mark, mirred) to a sink TAP per ingress source; the engine reads them there,
 * puts each in one of eight queues of its egress port by DSCP, and drains each port at its
 * line rate (frame + preamble, FCS and inter-frame gap), deficit round robin over the queues
 * that are not paused. It sends through a packet socket marked DONE_MARK, which no redirect
 * matches, so a link impairment engine further along still takes the frame (the cable comes
 * after the port).
 *
 * Switch mode (`run switch`): frames reach the engine through the TAP of the port they came
 * in on (nftables marks them by ingress port before routing) or the CPU's TAP; the egress
 * port is the one whose MAC the routed frame carries as its source. All ports share one
 * buffer pool. A lossless priority group (its port's PFC bit set, its buffer profile given)
 * counts the bytes that came in on its port and still wait in any queue: past its XOFF point
 * (reserved + shared threshold, static or dynamic as SAI's alpha) the engine sends PAUSE for
 * that priority out of the ingress port, refreshes it while the group stays above, and sends
 * XON (quanta 0) once it drains below the XON point; what arrives meanwhile lands in the
 * group's headroom (XOFF_TH bytes), past which it is dropped and counted. Bytes beyond
 * what a sender at line rate lands in the port's pause window (the cable twice and the
 * sender's response) are ones a sender on time would still hold: on a VM whose vCPUs stall
 * for milliseconds an engine on the way was late, so they are admitted and counted apart
 * (late_packets), not dropped. Lossy traffic is admitted by its queue's dynamic threshold
 * against the pool's free space.
 * NIC mode (`run nic`): one port, the host's; its egress frames come through one TAP.
 *
 * Both modes honour received PAUSE (opcode 0x0101 per priority, 0x0001 for all) on each
 * port for quanta x 512 bit times at the port's speed; WRED marks ECT frames CE (or drops
 * others when asked) with a probability linear between a queue's min and max thresholds;
 * a PFC watchdog finds a queue paused without pause for detect time and drops (or forwards)
 * until no PAUSE came for restore time. Credits beside pauses (ESUN) fit the same gate:
 * a queue is eligible when it has frames, is not paused and (later) holds credit.
 *
 *   fl-port run switch|nic CTL_SOCKET
 * The control socket (SOCK_SEQPACKET) takes one command per message; each answers "ok",
 * "error WHY" or its data:
 *   port ID name=IFACE tap=TAP speed_bps=N [dscp_tc=64 digits] [tc_queue=8 digits] [pfc=MASK]
 *        [pause_window_ns=N]           (twice the cable and the sender's response; 0: unknown)
 *   cpu tap=TAP                        (switch mode: frames the node itself sends)
 *   unport ID
 *   pool size=N
 *   pg ID PRIO reserved=N xoff=N xon=N xon_offset=N (dynamic_th=A | static_th=N)
 *   queue ID Q [dynamic_th=A | static_th=N] [wred=0|1 min=N max=N prob=PCT ecn=0|1 drop=0|1]
 *         [guard=0|1]                 (the port's PFC watchdog watches this queue)
 *   watchdog ID detect_ms=N restore_ms=N action=drop|forward|off
 *   storm ID MASK                      (send PAUSE for the priorities in MASK, for ever; 0 stops)
 *   stats | events
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <net/ethernet.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_NAME "fl-port"
#include "fl_engine.h"

#define MAX_PORTS 64
#define QUEUES 8
#define PRIOS 8
#define MAX_FRAME 65536
#define RX_BATCH 32
#define TX_BATCH 64
#define CAPTURE_BUFFER (8 << 20)
#define WIRE_OVERHEAD 24              /* preamble 8, FCS 4, inter-frame gap 12 */
#define PAUSE_QUANTA 0xFFFF
#define QUANTUM 1514                  /* DRR: one full frame per queue per round */
#define DONE_MARK 0x40000000u         /* frames this engine sends: no redirect matches them */
#define NO_PORT 0xFF
#define HIST 16                       /* WRED histogram: depth buckets up to twice max */
#define EVENTS 64
#define HOUSEKEEPING_NS 1000000LL     /* watchdog and pause expiry checks while anything waits */
#define STORM_EVERY_NS 10000000LL    /* a storming port pauses its peer this often: never lets go */
#define RT_PRIORITY 5                 /* ahead of senders and FRR, behind fl-impair's 10 */

static const unsigned char PAUSE_DST[6] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};

struct frame {
    struct frame *next;
    uint32_t len;
    uint8_t in_port, prio;            /* the lossless group it counts in, or NO_PORT */
    unsigned char data[];
};

struct threshold { int dynamic; int alpha; uint64_t bytes; };

struct queue {
    struct frame *head, *tail;
    uint64_t depth;
    int64_t deficit;
    struct threshold limit;
    int wred, ecn, wred_drop;
    uint64_t wred_min, wred_max, wred_prob;
    uint64_t packets, bytes, dropped, dropped_bytes, watermark, ecn_marked, wred_dropped;
    uint64_t hist_seen[HIST], hist_marked[HIST];
    int64_t paused_until, paused_since, last_pause;
    uint64_t paused_ns;
    int storm, guarded;
    uint64_t wd_detected, wd_restored, wd_dropped;
};

struct group {
    int lossless;
    uint64_t reserved, xoff, xon, xon_offset;
    struct threshold shared;
    uint64_t occupancy, watermark, headroom, headroom_watermark, packets, bytes, dropped;
    uint64_t xoff_point;              /* where the group stood when PAUSE went out */
    uint64_t since_pause;             /* bytes that came in since PAUSE went out */
    uint64_t late_packets, late_bytes; /* admitted past XOFF_TH: more than the window holds */
    int pausing;
    int64_t refresh_at;
};

struct port {
    int used;
    char name[IFNAMSIZ], tap[IFNAMSIZ];
    int ifindex;
    unsigned char mac[6];
    uint64_t speed_bps;
    uint8_t dscp_tc[64], tc_queue[PRIOS], pfc;
    int64_t pause_window_ns;          /* PAUSE out to a sender's last frame in: cable x 2 + response */
    int wire_fd, pause_fd, tap_fd, capture_fd;
    struct queue q[QUEUES];
    struct group pg[PRIOS];
    int64_t next_tx;
    int rr;
    uint64_t pfc_rx[PRIOS], pfc_tx[PRIOS], tx, tx_errors;
    uint8_t storm_mask;
    int64_t storm_at;
    int64_t wd_detect_ns, wd_restore_ns;
    int wd_action;                    /* 0 off, 1 drop, 2 forward */
};

struct engine {
    int nic;
    struct port ports[MAX_PORTS];
    int cpu_tap_fd, cpu_capture_fd;
    uint64_t pool_size, pool_occupancy, pool_watermark, pool_dropped;
    uint64_t unrouted, rng;
    int64_t late_max_ns;              /* the most a frame or a PAUSE waited for the engine */
    char events[EVENTS][160];
    unsigned event_count;
};

static struct engine E;
static volatile sig_atomic_t stopping;
static void on_stop(int sig) { (void)sig; stopping = 1; }

/* -- helpers ------------------------------------------------------------------------------ */

static uint64_t next_random(void)
{
    E.rng ^= E.rng << 13;
    E.rng ^= E.rng >> 7;
    E.rng ^= E.rng << 17;
    return E.rng;
}

static void event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void event(const char *fmt, ...)
{
    char *slot = E.events[E.event_count++ % EVENTS];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(slot, 160, "%" PRId64 ".%03ld ", (int64_t)ts.tv_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(slot + n, 160 - (size_t)n, fmt, ap);
    va_end(ap);
    printf("event %s\n", slot);
    fflush(stdout);
}

static int64_t wire_ns(const struct port *p, uint64_t bytes)
{
    return (int64_t)((bytes * 8 * 1000000000ULL) / p->speed_bps);
}

static int64_t quanta_ns(const struct port *p, uint64_t quanta)
{
    return (int64_t)(quanta * 512 * 1000000000ULL / p->speed_bps);
}

/* A threshold's bytes now: static, or SAI's dynamic alpha (2^alpha x free pool). */
static uint64_t limit_of(const struct threshold *t)
{
    if (!t->dynamic)
        return t->bytes;
    uint64_t free = E.pool_size > E.pool_occupancy ? E.pool_size - E.pool_occupancy : 0;
    return t->alpha >= 0 ? free << t->alpha : free >> -t->alpha;
}

/* -- classification and ECN ----------------------------------------------------------------- */

static int dscp_of(const unsigned char *f, uint32_t len, int *ecn_at)
{
    uint16_t type = (uint16_t)(f[12] << 8 | f[13]);
    if (type == ETHERTYPE_IP && len >= 34) {
        *ecn_at = 15;
        return f[15] >> 2;
    }
    if (type == ETHERTYPE_IPV6 && len >= 54) {
        *ecn_at = 14;
        return ((f[14] & 0x0f) << 2) | (f[15] >> 6);
    }
    *ecn_at = 0;
    return 0;
}

static int ecn_bits(const unsigned char *f, int at)
{
    return at == 15 ? f[15] & 3 : (f[15] >> 4) & 3;
}

static void mark_ce(unsigned char *f, int at)
{
    if (at == 15) {   /* IPv4: TOS and the header checksum, incrementally (RFC 1624) */
        uint16_t old = (uint16_t)(f[14] << 8 | f[15]);
        f[15] |= 3;
        uint16_t new = (uint16_t)(f[14] << 8 | f[15]);
        uint32_t sum = (uint16_t)~(f[24] << 8 | f[25]);
        sum += (uint16_t)~old + new;
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        uint16_t check = (uint16_t)~sum;
        f[24] = check >> 8;
        f[25] = check & 0xff;
    } else {
        f[15] |= 0x30;
    }
}

/* WRED on `q` for a frame arriving at its depth: 1 to drop it (ECN off or not ECT). */
static int wred(struct queue *q, unsigned char *f, int ecn_at)
{
    if (!q->wred || !ecn_at)
        return 0;
    int ect = ecn_bits(f, ecn_at) != 0;
    uint64_t depth = q->depth, p1000;
    if (depth < q->wred_min)
        p1000 = 0;
    else if (depth >= q->wred_max)
        p1000 = 1000;
    else
        p1000 = (depth - q->wred_min) * q->wred_prob * 10 / (q->wred_max - q->wred_min);
    unsigned bucket = q->wred_max ? (unsigned)(depth * HIST / (2 * q->wred_max)) : 0;
    if (bucket >= HIST)
        bucket = HIST - 1;
    int hit = p1000 && next_random() % 1000 < p1000;
    if (ect) {
        q->hist_seen[bucket]++;
        if (hit && q->ecn) {
            if (ecn_bits(f, ecn_at) != 3)   /* already CE: counted, left as it is */
                mark_ce(f, ecn_at);
            q->ecn_marked++;
            q->hist_marked[bucket]++;
        }
        return hit && !q->ecn;
    }
    return hit && q->wred_drop;
}

/* -- PAUSE ----------------------------------------------------------------------------------- */

static void send_pause(struct port *p, uint8_t mask, uint16_t quanta)
{
    unsigned char f[60] = {0};
    memcpy(f, PAUSE_DST, 6);
    memcpy(f + 6, p->mac, 6);
    f[12] = 0x88; f[13] = 0x08;
    f[14] = 0x01; f[15] = 0x01;   /* opcode: priority-based flow control */
    f[16] = 0; f[17] = mask;      /* class-enable vector */
    for (int i = 0; i < PRIOS; i++)
        if (mask & (1 << i)) {
            f[18 + 2 * i] = quanta >> 8;
            f[19 + 2 * i] = quanta & 0xff;
            p->pfc_tx[i]++;
        }
    struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_ifindex = p->ifindex,
                             .sll_protocol = htons(0x8808), .sll_halen = 6};
    if (sendto(p->wire_fd, f, sizeof f, 0, (struct sockaddr *)&to, sizeof to) < 0)
        p->tx_errors++;
}

static void pause_arrived(struct port *p, const unsigned char *f, ssize_t len, int64_t now)
{
    if (len < 20 || memcmp(f + 12, "\x88\x08", 2))
        return;
    uint16_t opcode = (uint16_t)(f[14] << 8 | f[15]);
    for (int prio = 0; prio < PRIOS; prio++) {
        uint16_t quanta;
        if (opcode == 0x0101 && len >= 34 && (f[17] & (1 << prio)))
            quanta = (uint16_t)(f[18 + 2 * prio] << 8 | f[19 + 2 * prio]);
        else if (opcode == 0x0001)
            quanta = (uint16_t)(f[16] << 8 | f[17]);
        else
            continue;
        p->pfc_rx[prio]++;
        struct queue *q = &p->q[p->tc_queue[prio]];
        q->last_pause = now;
        if (q->storm)
            continue;   /* the watchdog ignores a storming peer until it stops */
        if (quanta && q->paused_until <= now)
            q->paused_since = now;
        if (!quanta && q->paused_until > now)
            q->paused_ns += (uint64_t)(now - q->paused_since);
        q->paused_until = quanta ? now + quanta_ns(p, quanta) : 0;
    }
}

/* -- buffer ----------------------------------------------------------------------------------- */

static void release(struct queue *q, struct frame *f)
{
    q->depth -= f->len;
    E.pool_occupancy -= f->len;
    if (f->in_port == NO_PORT)
        return;
    struct port *in = &E.ports[f->in_port];
    struct group *g = &in->pg[f->prio];
    g->occupancy -= f->len;
    if (g->headroom)
        g->headroom = g->occupancy > g->xoff_point ? g->occupancy - g->xoff_point : 0;
    uint64_t resume = g->xon ? g->xon : g->xoff_point > g->xon_offset
                      ? g->xoff_point - g->xon_offset : 0;
    if (g->pausing && g->occupancy <= resume) {
        g->pausing = 0;
        if (in->used)
            send_pause(in, (uint8_t)(1 << f->prio), 0);
    }
}

static void drop_queue(struct queue *q)
{
    struct frame *f;
    while ((f = q->head)) {
        q->head = f->next;
        release(q, f);
        q->wd_dropped++;
        free(f);
    }
    q->tail = NULL;
}

static void enqueue(struct port *out, int in_port, unsigned char *data, uint32_t len, int64_t now)
{
    int ecn_at;
    int dscp = dscp_of(data, len, &ecn_at);
    uint8_t prio = out->dscp_tc[dscp];
    struct queue *q = &out->q[out->tc_queue[prio]];
    if (q->storm && out->wd_action == 1) {
        q->wd_dropped++;
        return;
    }
    struct group *g = NULL;
    struct port *in = in_port == NO_PORT ? NULL : &E.ports[in_port];
    if (in && (in->pfc & (1 << prio)) && in->pg[prio].lossless)
        g = &in->pg[prio];
    if (E.pool_occupancy + len > E.pool_size) {
        E.pool_dropped++;
        q->dropped++;
        q->dropped_bytes += len;
        if (g)
            g->dropped++;
        return;
    }
    if (g) {
        uint64_t point = g->reserved + limit_of(&g->shared);
        if (!g->pausing && g->occupancy + len > point) {
            g->pausing = 1;
            g->xoff_point = g->occupancy;
            g->since_pause = 0;
            g->refresh_at = now + quanta_ns(in, PAUSE_QUANTA) / 2;
            send_pause(in, (uint8_t)(1 << prio), PAUSE_QUANTA);
        }
        if (g->pausing) {
            uint64_t above = g->occupancy + len > g->xoff_point
                             ? g->occupancy + len - g->xoff_point : 0;
            /* Once PAUSE is out, a sender at line rate lands at most its pause window (the
             * cable twice and its response) of bytes and the frames begun. More can only come
             * when an engine on the way (this one, a cable's, the sender's NIC) was late or
             * bunched frames up, and a sender on time would still hold them: past XOFF_TH
             * those are admitted and counted apart, while what the window holds is the
             * headroom's, dropped when it is full. */
            g->since_pause += len;
            if (above > g->xoff) {
                uint64_t window = (uint64_t)(in->pause_window_ns * (double)in->speed_bps / 8e9)
                                  + 2 * len;
                if (!in->pause_window_ns || g->since_pause <= window) {
                    g->dropped++;
                    q->dropped++;
                    q->dropped_bytes += len;
                    return;
                }
                g->late_packets++;
                g->late_bytes += len;
            }
            g->headroom = above;
            uint64_t charged = above < g->xoff ? above : g->xoff;
            if (charged > g->headroom_watermark)
                g->headroom_watermark = charged;
        }
    } else if (q->depth + len > limit_of(&q->limit)) {
        q->dropped++;
        q->dropped_bytes += len;
        return;
    }
    if (wred(q, data, ecn_at)) {   /* after admission: a mark counts a frame queued */
        q->wred_dropped++;
        q->dropped++;
        q->dropped_bytes += len;
        return;
    }
    struct frame *f = malloc(sizeof *f + len);
    if (!f)
        die("malloc");
    f->next = NULL;
    f->len = len;
    f->in_port = g ? (uint8_t)in_port : NO_PORT;
    f->prio = prio;
    memcpy(f->data, data, len);
    if (q->tail)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
    q->depth += len;
    if (q->depth > q->watermark)
        q->watermark = q->depth;
    E.pool_occupancy += len;
    if (E.pool_occupancy > E.pool_watermark)
        E.pool_watermark = E.pool_occupancy;
    if (g) {
        g->occupancy += len;
        g->packets++;
        g->bytes += len;
        if (g->occupancy > g->watermark)
            g->watermark = g->occupancy;
    }
}

/* -- scheduling ------------------------------------------------------------------------- */

static int eligible(const struct queue *q, int64_t now)
{
    return q->head && (q->storm || q->paused_until <= now);
}

/* Deficit round robin: the next frame to send, or NULL when no queue may. */
static struct frame *dequeue(struct port *p, int64_t now, struct queue **from)
{
    for (int tries = 0; tries < 2 * QUEUES + 1; tries++) {
        struct queue *q = &p->q[p->rr];
        if (eligible(q, now) && q->deficit >= (int64_t)q->head->len) {
            struct frame *f = q->head;
            q->head = f->next;
            if (!q->head)
                q->tail = NULL;
            q->deficit -= f->len;
            *from = q;
            return f;
        }
        if (eligible(q, now))
            q->deficit += QUANTUM;
        else
            q->deficit = 0;
        if (!eligible(q, now) || q->deficit < (int64_t)q->head->len)
            p->rr = (p->rr + 1) % QUEUES;
    }
    return NULL;
}

/* The frames one wake-up found due on a port, sent in one sendmmsg (issue 40: a wake-up and a
 * system call per frame was the cost on two cores). */
struct burst {
    int n;
    struct frame *f[TX_BATCH];
    struct sockaddr_ll to[TX_BATCH];
    struct iovec iov[TX_BATCH];
    struct mmsghdr msgs[TX_BATCH];
};

static void count_send(int i, int err, void *ctx)
{
    struct port *p = ctx;
    (void)i;
    *(err ? &p->tx_errors : &p->tx) += 1;
}

static void burst_flush(struct port *p, struct burst *b)
{
    send_each(p->wire_fd, b->msgs, b->n, count_send, p);
    for (int i = 0; i < b->n; i++)
        free(b->f[i]);
    b->n = 0;
}

static void transmit(struct port *p, int64_t now)
{
    static struct burst b;
    while (p->next_tx <= now) {
        struct queue *q;
        struct frame *f = dequeue(p, now, &q);
        if (!f)
            break;
        int i = b.n++;
        b.f[i] = f;
        b.to[i] = (struct sockaddr_ll){.sll_family = AF_PACKET, .sll_ifindex = p->ifindex,
                                       .sll_halen = 6};
        memcpy(&b.to[i].sll_protocol, f->data + 12, 2);
        b.iov[i] = (struct iovec){.iov_base = f->data, .iov_len = f->len};
        b.msgs[i].msg_hdr = (struct msghdr){.msg_name = &b.to[i], .msg_namelen = sizeof b.to[i],
                                            .msg_iov = &b.iov[i], .msg_iovlen = 1};
        q->packets++;
        q->bytes += f->len;
        int64_t start = p->next_tx > now - wire_ns(p, QUANTUM) ? p->next_tx : now;
        p->next_tx = start + wire_ns(p, f->len + WIRE_OVERHEAD);
        release(q, f);
        if (b.n == TX_BATCH)
            burst_flush(p, &b);
    }
    burst_flush(p, &b);
}

/* Pause refreshes, storms and the watchdog. */
static void housekeeping(struct port *p, int64_t now)
{
    for (int prio = 0; prio < PRIOS; prio++) {
        struct group *g = &p->pg[prio];
        if (g->pausing && now >= g->refresh_at) {
            send_pause(p, (uint8_t)(1 << prio), PAUSE_QUANTA);
            g->refresh_at = now + quanta_ns(p, PAUSE_QUANTA) / 2;
        }
    }
    if (p->storm_mask && now >= p->storm_at) {
        send_pause(p, p->storm_mask, PAUSE_QUANTA);
        p->storm_at = now + STORM_EVERY_NS;
    }
    for (int i = 0; i < QUEUES; i++) {
        struct queue *q = &p->q[i];
        if (q->paused_until && q->paused_until <= now) {
            q->paused_ns += (uint64_t)(q->paused_until - q->paused_since);
            q->paused_until = 0;
        }
        if (!p->wd_action || !q->guarded)
            continue;
        if (!q->storm && q->head && q->paused_until > now
                && now - q->paused_since >= p->wd_detect_ns) {
            q->storm = 1;
            q->wd_detected++;
            q->paused_ns += (uint64_t)(now - q->paused_since);
            q->paused_until = 0;
            event("pfc_storm_detected port=%s queue=%d action=%s", p->name, i,
                  p->wd_action == 1 ? "drop" : "forward");
            if (p->wd_action == 1)
                drop_queue(q);
        } else if (q->storm && now - q->last_pause >= p->wd_restore_ns) {
            q->storm = 0;
            q->wd_restored++;
            event("pfc_storm_restored port=%s queue=%d", p->name, i);
        }
    }
}

static int64_t next_wake(int64_t now)
{
    int64_t wake = INT64_MAX;
    for (int i = 0; i < MAX_PORTS; i++) {
        struct port *p = &E.ports[i];
        if (!p->used)
            continue;
        int waiting = 0;
        for (int j = 0; j < QUEUES; j++) {
            struct queue *q = &p->q[j];
            if (eligible(q, now))
                wake = p->next_tx < wake ? p->next_tx : wake;
            else if (q->head && q->paused_until < wake)
                wake = q->paused_until;
            waiting |= q->head != NULL || q->paused_until;
        }
        for (int prio = 0; prio < PRIOS; prio++)
            if (p->pg[prio].pausing && p->pg[prio].refresh_at < wake)
                wake = p->pg[prio].refresh_at;
        if (p->storm_mask && p->storm_at < wake)
            wake = p->storm_at;
        if (waiting && now + HOUSEKEEPING_NS < wake)
            wake = now + HOUSEKEEPING_NS;
    }
    return wake;
}

/* -- frames in --------------------------------------------------------------------------------- */

static struct port *port_by_mac(const unsigned char *mac)
{
    for (int i = 0; i < MAX_PORTS; i++)
        if (E.ports[i].used && !memcmp(E.ports[i].mac, mac, 6))
            return &E.ports[i];
    return NULL;
}

/* How long a frame the kernel stamped at `m`'s arrival waited for the engine: the
 * emulation's own lateness, which a PFC response budget must cover (headroom.py). The
 * stamp is CLOCK_REALTIME; `offset` takes it to CLOCK_MONOTONIC. */
static void note_lateness(struct msghdr *m, int64_t offset, int64_t now)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS)
            continue;
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof ts);
        int64_t late = now - (ns_of(&ts) - offset);
        if (late > E.late_max_ns)
            E.late_max_ns = late;
    }
}

static int64_t realtime_offset(int64_t now)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    return ns_of(&rt) - now;
}

typedef union { char buf[CMSG_SPACE(sizeof(struct timespec))]; struct cmsghdr align; } stamp_t;

static void take(int fd, int in_port, struct port *fixed, int64_t now)
{
    static unsigned char frames[RX_BATCH][MAX_FRAME];
    static struct mmsghdr msgs[RX_BATCH];
    static struct iovec iov[RX_BATCH];
    static stamp_t stamps[RX_BATCH];
    for (int i = 0; i < RX_BATCH; i++) {
        iov[i] = (struct iovec){.iov_base = frames[i], .iov_len = MAX_FRAME};
        msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1,
                                          .msg_control = stamps[i].buf,
                                          .msg_controllen = sizeof stamps[i].buf};
    }
    int n = recvmmsg(fd, msgs, RX_BATCH, MSG_DONTWAIT, NULL);
    int64_t offset = n > 0 ? realtime_offset(now) : 0;
    for (int i = 0; i < n; i++) {
        uint32_t len = msgs[i].msg_len;
        note_lateness(&msgs[i].msg_hdr, offset, now);
        if (len < 14)
            continue;
        struct port *out = fixed ? fixed : port_by_mac(frames[i] + 6);
        if (!out) {
            E.unrouted++;
            continue;
        }
        enqueue(out, in_port, frames[i], len, now);
    }
}

/* PAUSE frames that arrived on `p`, in order. */
static void take_pauses(struct port *p, int64_t now)
{
    unsigned char f[128];
    stamp_t stamp;
    int64_t offset = realtime_offset(now);
    for (;;) {
        struct iovec iov = {.iov_base = f, .iov_len = sizeof f};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = stamp.buf,
                           .msg_controllen = sizeof stamp.buf};
        ssize_t len = recvmsg(p->pause_fd, &m, MSG_DONTWAIT);
        if (len <= 0)
            return;
        note_lateness(&m, offset, now);
        pause_arrived(p, f, len, now);
    }
}

/* -- control ---------------------------------------------------------------------------- */

static int64_t number(const char *words, const char *key, int64_t otherwise)
{
    char pattern[48];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *at = strstr(words, pattern);
    return at ? strtoll(at + strlen(pattern), NULL, 0) : otherwise;
}

static int text(const char *words, const char *key, char *out, size_t size)
{
    char pattern[48];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *at = strstr(words, pattern);
    if (!at)
        return 0;
    at += strlen(pattern);
    size_t n = strcspn(at, " ");
    if (n >= size)
        n = size - 1;
    memcpy(out, at, n);
    out[n] = 0;
    return 1;
}

static void threshold(const char *words, struct threshold *t)
{
    if (strstr(words, " static_th=")) {
        t->dynamic = 0;
        t->bytes = (uint64_t)number(words, "static_th", 0);
    } else if (strstr(words, " dynamic_th=")) {
        t->dynamic = 1;
        t->alpha = (int)number(words, "dynamic_th", 0);
    }
}

static int open_port(struct port *p, char *err, size_t errlen)
{
    p->ifindex = (int)if_nametoindex(p->name);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq q = {0};
    snprintf(q.ifr_name, IFNAMSIZ, "%s", p->name);
    int ok = p->ifindex && s >= 0 && ioctl(s, SIOCGIFHWADDR, &q) == 0;
    if (s >= 0)
        close(s);
    if (!ok) {
        snprintf(err, errlen, "no port %s", p->name);
        return -1;
    }
    memcpy(p->mac, q.ifr_hwaddr.sa_data, 6);
    p->wire_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);   /* protocol 0: transmit only */
    unsigned mark = DONE_MARK;
    int sndbuf = 4 << 20;
    if (p->wire_fd < 0 || setsockopt(p->wire_fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0)
        die("SO_MARK");
    setsockopt(p->wire_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    p->pause_fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (p->pause_fd < 0 || packet_bind(p->pause_fd, p->ifindex, 0x8808) < 0
            || setsockopt(p->pause_fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
        die("bind MAC control");
    p->tap_fd = sink_tap(p->tap, p->name);
    p->capture_fd = tap_capture(p->tap, CAPTURE_BUFFER, 1);
    return 0;
}

static void close_port(struct port *p)
{
    for (int i = 0; i < QUEUES; i++)
        drop_queue(&p->q[i]);
    uint8_t id = (uint8_t)(p - E.ports);   /* frames of its groups elsewhere count in none */
    for (int i = 0; i < MAX_PORTS; i++)
        for (int j = 0; j < QUEUES; j++)
            for (struct frame *f = E.ports[i].q[j].head; f; f = f->next)
                if (f->in_port == id)
                    f->in_port = NO_PORT;
    close(p->wire_fd);
    close(p->pause_fd);
    close(p->capture_fd);
    close(p->tap_fd);
    memset(p, 0, sizeof *p);
}

static int digits(const char *words, const char *key, uint8_t *out, int n, char *err, size_t errlen)
{
    char value[80];
    if (!text(words, key, value, sizeof value))
        return 0;
    if ((int)strlen(value) != n || strspn(value, "01234567") != (size_t)n) {
        snprintf(err, errlen, "%s wants %d digits 0-7", key, n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        out[i] = (uint8_t)(value[i] - '0');
    return 0;
}

static int command(char *req, int64_t now, char *err, size_t errlen)
{
    char verb[16] = "";
    int id = -1, index = -1, used = 0;
    sscanf(req, "%15s %d %d%n", verb, &id, &index, &used);
    char words[1100];
    snprintf(words, sizeof words, " %s", req);
    int is_port = id >= 0 && id < MAX_PORTS;
    struct port *p = is_port ? &E.ports[id] : NULL;
    if (!strcmp(verb, "port") && is_port) {
        char name[IFNAMSIZ] = "", tap[IFNAMSIZ] = "";
        text(words, "name", name, sizeof name);
        text(words, "tap", tap, sizeof tap);
        uint64_t speed = (uint64_t)number(words, "speed_bps", (int64_t)p->speed_bps);
        if (!speed || (!p->used && (!*name || !*tap))) {
            snprintf(err, errlen, "port wants name=, tap= and speed_bps=");
            return -1;
        }
        if (E.nic && id != 0) {
            snprintf(err, errlen, "a NIC has one port, 0");
            return -1;
        }
        uint8_t dscp_tc[64], tc_queue[PRIOS];
        memcpy(dscp_tc, p->dscp_tc, 64);
        memcpy(tc_queue, p->tc_queue, PRIOS);
        if (!p->used)
            for (int i = 0; i < PRIOS; i++)
                tc_queue[i] = (uint8_t)i;
        if (digits(words, "dscp_tc", dscp_tc, 64, err, errlen) < 0
                || digits(words, "tc_queue", tc_queue, PRIOS, err, errlen) < 0)
            return -1;
        if (!p->used) {
            snprintf(p->name, IFNAMSIZ, "%s", name);
            snprintf(p->tap, IFNAMSIZ, "%s", tap);
            for (int i = 0; i < QUEUES; i++)
                p->q[i].limit = (struct threshold){.dynamic = 1, .alpha = 0};
            if (open_port(p, err, errlen) < 0) {
                memset(p, 0, sizeof *p);
                return -1;
            }
            p->used = 1;
        }
        p->speed_bps = speed;
        memcpy(p->dscp_tc, dscp_tc, 64);
        memcpy(p->tc_queue, tc_queue, PRIOS);
        p->pfc = (uint8_t)number(words, "pfc", p->pfc);
        p->pause_window_ns = number(words, "pause_window_ns", p->pause_window_ns);
        return 0;
    }
    if (!strcmp(verb, "cpu")) {
        char tap[IFNAMSIZ] = "";
        if (E.nic || !text(words, "tap", tap, sizeof tap)) {
            snprintf(err, errlen, "cpu wants tap= (switch mode)");
            return -1;
        }
        const char *mtu_of = NULL;   /* the CPU sends on the ports: the first one's MTU */
        for (int i = 0; i < MAX_PORTS && !mtu_of; i++)
            mtu_of = E.ports[i].used ? E.ports[i].name : NULL;
        if (!mtu_of) {
            snprintf(err, errlen, "cpu wants a port first");
            return -1;
        }
        if (E.cpu_tap_fd < 0) {
            E.cpu_tap_fd = sink_tap(tap, mtu_of);
            E.cpu_capture_fd = tap_capture(tap, CAPTURE_BUFFER, 1);
        }
        return 0;
    }
    if (!strcmp(verb, "pool")) {
        E.pool_size = (uint64_t)number(words, "size", (int64_t)E.pool_size);
        return 0;
    }
    if (!is_port || !p->used) {
        snprintf(err, errlen, "%s: no port %d", verb, id);
        return -1;
    }
    if (!strcmp(verb, "unport")) {
        close_port(p);
        return 0;
    }
    if (!strcmp(verb, "watchdog")) {
        char action[16] = "drop";
        text(words, "action", action, sizeof action);
        p->wd_action = !strcmp(action, "drop") ? 1 : !strcmp(action, "forward") ? 2 : 0;
        p->wd_detect_ns = number(words, "detect_ms", 200) * 1000000LL;
        p->wd_restore_ns = number(words, "restore_ms", 400) * 1000000LL;
        for (int i = 0; i < QUEUES && !p->wd_action; i++)
            p->q[i].storm = 0;   /* off: no queue stays in a storm nobody watches */
        return 0;
    }
    if (!strcmp(verb, "storm")) {
        if (p->storm_mask & ~index)   /* a port that recovers says so: XON for what it held */
            send_pause(p, (uint8_t)(p->storm_mask & ~index), 0);
        p->storm_mask = (uint8_t)index;
        p->storm_at = now;
        return 0;
    }
    if (index < 0 || index >= PRIOS) {
        snprintf(err, errlen, "%s wants a port and an index 0-7", verb);
        return -1;
    }
    if (!strcmp(verb, "pg")) {
        struct group *g = &p->pg[index];
        g->lossless = 1;
        g->reserved = (uint64_t)number(words, "reserved", 0);
        g->xoff = (uint64_t)number(words, "xoff", 0);
        g->xon = (uint64_t)number(words, "xon", 0);
        g->xon_offset = (uint64_t)number(words, "xon_offset", 0);
        threshold(words, &g->shared);
        return 0;
    }
    if (!strcmp(verb, "queue")) {
        struct queue *q = &p->q[index];
        threshold(words, &q->limit);
        q->wred = (int)number(words, "wred", q->wred);
        q->wred_min = (uint64_t)number(words, "min", (int64_t)q->wred_min);
        q->wred_max = (uint64_t)number(words, "max", (int64_t)q->wred_max);
        q->wred_prob = (uint64_t)number(words, "prob", (int64_t)q->wred_prob);
        q->ecn = (int)number(words, "ecn", q->ecn);
        q->wred_drop = (int)number(words, "drop", q->wred_drop);
        q->guarded = (int)number(words, "guard", q->guarded);
        if (q->wred && (q->wred_min >= q->wred_max || q->wred_prob > 100)) {
            q->wred = 0;
            snprintf(err, errlen, "WRED wants min < max and prob 0-100");
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen, "unknown command %s", verb);
    return -1;
}

static void stats(FILE *f, int64_t now)
{
    fprintf(f, "pool size=%" PRIu64 " occupancy=%" PRIu64 " watermark=%" PRIu64 " dropped=%" PRIu64
            " unrouted=%" PRIu64 " late_max_us=%" PRId64 "\n", E.pool_size, E.pool_occupancy,
            E.pool_watermark, E.pool_dropped, E.unrouted, E.late_max_ns / 1000);
    for (int i = 0; i < MAX_PORTS; i++) {
        struct port *p = &E.ports[i];
        if (!p->used)
            continue;
        fprintf(f, "port %d name=%s speed_bps=%" PRIu64 " tx=%" PRIu64 " tx_errors=%" PRIu64 "\n",
                i, p->name, p->speed_bps, p->tx, p->tx_errors);
        for (int j = 0; j < QUEUES; j++) {
            struct queue *q = &p->q[j];
            uint64_t paused = q->paused_ns + (q->paused_until > now
                                              ? (uint64_t)(now - q->paused_since) : 0);
            fprintf(f, "queue %d %d packets=%" PRIu64 " bytes=%" PRIu64 " dropped=%" PRIu64
                    " dropped_bytes=%" PRIu64 " depth=%" PRIu64 " watermark=%" PRIu64
                    " ecn_marked=%" PRIu64 " wred_dropped=%" PRIu64 " paused_us=%" PRIu64
                    " storm=%d wd_detected=%" PRIu64 " wd_restored=%" PRIu64 " wd_dropped=%"
                    PRIu64, i, j, q->packets, q->bytes, q->dropped, q->dropped_bytes, q->depth,
                    q->watermark, q->ecn_marked, q->wred_dropped, paused / 1000, q->storm,
                    q->wd_detected, q->wd_restored, q->wd_dropped);
            if (q->wred) {
                fprintf(f, " hist=");
                for (int b = 0; b < HIST; b++)
                    fprintf(f, "%s%" PRIu64 "/%" PRIu64, b ? "," : "", q->hist_marked[b],
                            q->hist_seen[b]);
            }
            fputc('\n', f);
        }
        for (int prio = 0; prio < PRIOS; prio++) {
            struct group *g = &p->pg[prio];
            fprintf(f, "pg %d %d packets=%" PRIu64 " bytes=%" PRIu64 " occupancy=%" PRIu64
                    " watermark=%" PRIu64 " headroom=%" PRIu64 " headroom_watermark=%" PRIu64
                    " dropped=%" PRIu64 " late_packets=%" PRIu64 " late_bytes=%" PRIu64
                    " pausing=%d pfc_rx=%" PRIu64 " pfc_tx=%" PRIu64 "\n",
                    i, prio, g->packets, g->bytes, g->occupancy, g->watermark, g->headroom,
                    g->headroom_watermark, g->dropped, g->late_packets, g->late_bytes,
                    g->pausing, p->pfc_rx[prio], p->pfc_tx[prio]);
        }
    }
}

static void serve_control(int listener)
{
    int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int big = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    static char req[1024], reply[1 << 19];
    char err[160];
    ssize_t n = recv(fd, req, sizeof req - 1, 0);
    if (n > 0) {
        req[n] = 0;
        int64_t now = now_ns();
        FILE *f = fmemopen(reply, sizeof reply, "w");
        if (!strcmp(req, "stats")) {
            stats(f, now);
        } else if (!strcmp(req, "events")) {
            unsigned first = E.event_count > EVENTS ? E.event_count - EVENTS : 0;
            for (unsigned i = first; i < E.event_count; i++)
                fprintf(f, "%s\n", E.events[i % EVENTS]);
        } else if (command(req, now, err, sizeof err) == 0) {
            fprintf(f, "ok");
        } else {
            fprintf(f, "error %s", err);
        }
        fclose(f);
        send(fd, reply, strlen(reply), MSG_NOSIGNAL);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "run")
            || (strcmp(argv[2], "switch") && strcmp(argv[2], "nic"))) {
        fprintf(stderr, "usage: fl-port run switch|nic CTL_SOCKET\n");
        return 2;
    }
    E.nic = !strcmp(argv[2], "nic");
    E.cpu_tap_fd = E.cpu_capture_fd = -1;
    E.pool_size = 64 << 20;
    E.rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
    prctl(PR_SET_TIMERSLACK, 1UL);
    /* A port acts on PAUSE within its response time (headroom.py's EMULATED_RESPONSE_US);
     * on two cores busy with the very senders it paces, only a real-time priority keeps
     * that short. It sleeps in ppoll between frames, so it takes little of the CPU. */
    struct sched_param sp = {.sched_priority = RT_PRIORITY};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
        fprintf(stderr, "fl-port: no real-time priority (%s); PAUSE is acted on later\n",
                strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    int ctl = control_listen(argv[3]);
    printf("ready %s\n", argv[2]);
    fflush(stdout);
    struct pollfd fds[2 + 2 * MAX_PORTS];
    int owner[2 + 2 * MAX_PORTS];   /* port index; -1 control, -2 CPU; + MAX_PORTS: pauses */
    while (!stopping) {
        int64_t now = now_ns();
        for (int i = 0; i < MAX_PORTS; i++)
            if (E.ports[i].used) {
                housekeeping(&E.ports[i], now);
                transmit(&E.ports[i], now);
            }
        int n = 0;
        fds[n] = (struct pollfd){.fd = ctl, .events = POLLIN};
        owner[n++] = -1;
        if (E.cpu_capture_fd >= 0) {
            fds[n] = (struct pollfd){.fd = E.cpu_capture_fd, .events = POLLIN};
            owner[n++] = -2;
        }
        for (int i = 0; i < MAX_PORTS; i++)
            if (E.ports[i].used) {
                fds[n] = (struct pollfd){.fd = E.ports[i].capture_fd, .events = POLLIN};
                owner[n++] = i;
                fds[n] = (struct pollfd){.fd = E.ports[i].pause_fd, .events = POLLIN};
                owner[n++] = MAX_PORTS + i;
            }
        /* A due time already past is a zero wait, never an endless one. */
        int64_t wake = next_wake(now), wait = wake - now_ns();
        wait = wait > 0 ? wait : 0;
        struct timespec ts = {.tv_sec = wait / 1000000000LL, .tv_nsec = wait % 1000000000LL};
        if (ppoll(fds, (nfds_t)n, wake == INT64_MAX ? NULL : &ts, NULL) < 0 && errno != EINTR)
            die("ppoll");
        now = now_ns();
        for (int i = 0; i < n; i++) {
            if (!(fds[i].revents & POLLIN))
                continue;
            if (owner[i] == -1) {
                serve_control(ctl);
            } else if (owner[i] == -2) {
                take(E.cpu_capture_fd, NO_PORT, NULL, now);
            } else if (owner[i] >= MAX_PORTS) {
                if (E.ports[owner[i] - MAX_PORTS].used)
                    take_pauses(&E.ports[owner[i] - MAX_PORTS], now);
            } else if (E.ports[owner[i]].used) {
                struct port *p = &E.ports[owner[i]];
                take(p->capture_fd, E.nic ? NO_PORT : owner[i], E.nic ? p : NULL, now);
            }
        }
    }
    unlink(argv[3]);
    return 0;
}
