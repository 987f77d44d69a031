/* fl-impair: the userspace impairment engine for the egress of one interface.
 *
 * Used where the kernel has no sch_netem. tc redirects every frame leaving IFACE (clsact egress,
 * u32 match-all, mirred) to a TAP this process owns. The TAP has no offloads, so the kernel
 * segments and checksums each frame as a NIC would need it; an AF_PACKET socket on the TAP takes
 * it with the kernel's transmit timestamp, and a socket filter on the TAP's own queue drops it
 * there (the TAP is only a sink: its TX dropped counter counts every frame). Each frame is
 * dropped or duplicated by chance, serialised at `rate`, held on a hashed timer wheel for
 * delay +- jitter from that timestamp, and then sent on IFACE through an AF_PACKET socket with
 * PACKET_QDISC_BYPASS, so it never meets the redirect again. IFACE itself never goes down, so
 * routing sessions over it survive any live change.
 *
 * Timing on a loaded or virtualised box: a sleeping process wakes tens of microseconds late.
 * The arrival timestamp keeps that out of the receive side; on the send side the engine wakes
 * early by its measured wake-up latency (at least spin_ns) and polls until the due time, but
 * never for more than a quarter of the spacing of due times (see struct pacer).
 *
 * Batches (batch=1, the default): on a 2-core box carrying a TCP flow through a chain of
 * engines, the wake-ups, not the copies, are the cost: a context switch per frame per engine.
 * So one wake-up serves many frames: what is due leaves in one sendmmsg, and a wake-up that
 * sends comes no sooner than a window (batch_ns, at most 1/16 of the delay) after the last one
 * that sent, so frames due in between wait and leave together: never early, late by less than
 * the window. Arrivals are read as NAPI reads a NIC: while the last read found
 * frames, the engine does not wake for each new one but reads again within half the shortest
 * delay a frame can get (their kernel timestamps keep their times exact; none can be due
 * sooner); an empty read makes it wait on the socket again. The lossless class decides PAUSE
 * on each arrival as it happens, so with it the engine reads every arrival at once. batch=0 is
 * the frame-at-a-time engine, kept as the benches' baseline.
 *
 *   fl-impair run IFACE TAP CTL_SOCKET [key=value...]
 *   fl-impair simulate [key=value...]      stdin: "arrival_ns length" lines
 *                                          stdout: "index due_ns" per frame sent, then stats
 * keys: delay_ns jitter_ns loss_pct duplicate_pct rate_bps limit seed spin_ns rt_priority
 *       batch batch_ns
 *       pfc_xoff pfc_headroom pfc_drain_bps pfc_response_ns pfc_dscp (the lossless class below)
 * The control socket (SOCK_SEQPACKET) takes "set key=value..." (all or nothing) and "stats"
 * (frame counters; polled_us: the time spent polling ahead of due times; wakeups: the sleeps
 * it woke from, polling rounds not counted; late_p50_us,
 * late_p99_us and late_max_us: how late frames left since the last set, see struct lateness;
 * with a lossless class, pfc_* counters, its peaks since the last set).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_NAME "fl-impair"
#include "fl_engine.h"

#define TICK_SHIFT 12                 /* one wheel slot = 4.096 us */
#define WHEEL_SLOTS (1u << 16)        /* one revolution = 268 ms; later frames wait rounds */
#define WHEEL_MASK (WHEEL_SLOTS - 1)
#define MAX_FRAME 65536
#define RX_BATCH 64
#define RX_ROUNDS 16
#define TX_BATCH 64
#define BATCH_SHARE 16                /* the coalescing window: at most 1/16 of the delay */
#define NAPI_MIN_NS 20000LL           /* below this read interval, wake on every arrival */
#define DRAIN_LIMIT_NS 2000000000LL   /* on SIGTERM, send what is queued for at most 2 s */
#define SPIN_MAX_NS 1000000LL         /* the early wake-up never exceeds 1 ms, however late */
#define CAPTURE_BUFFER (16 << 20)     /* bursts at line rate wait here until the engine reads */

struct params {
    int64_t delay_ns, jitter_ns, spin_ns, rt_priority, pfc_response_ns, batch, batch_ns;
    double loss_pct, duplicate_pct;
    uint64_t rate_bps, limit, seed, pfc_xoff, pfc_headroom, pfc_drain_bps, pfc_dscp;
};

struct packet {
    struct packet *next;
    int64_t due;
    uint64_t index;
    uint32_t len;
    unsigned char data[];
};

struct slot { struct packet *head, *tail; };

struct wheel {
    struct slot slots[WHEEL_SLOTS];
    int64_t cursor;          /* first tick not yet fully drained */
    uint64_t queued;
    int64_t next_due;        /* earliest due time, valid when next_valid */
    int next_valid;
};

struct counters {
    uint64_t rx, tx, lost, duplicated, overlimit, tx_errors, polled_ns, wakeups;
    uint64_t pfc_rx, pfc_dropped, pfc_pauses, pfc_paused_ns, pfc_peak, pfc_backlog_peak;
};

/* How late frames left (send time - due time): what the pacer could not hide of the machine's
 * wake-ups, which a user reads beside the delays a flow measured. A histogram in 1 us steps
 * below 16 us, then eight steps per octave (12.5%); a percentile is reported as its step's
 * upper bound. It starts anew at every `set`, so it describes the impairment in force. */
#define LATE_LINEAR 16
#define LATE_BUCKETS (LATE_LINEAR + 8 * 40)
struct lateness { uint64_t count[LATE_BUCKETS], frames; int64_t max_ns; };

static void lateness_add(struct lateness *l, int64_t late_ns)
{
    uint64_t us = late_ns > 0 ? (uint64_t)late_ns / 1000 : 0;
    unsigned i = (unsigned)us;
    if (us >= LATE_LINEAR) {
        unsigned octave = 63 - (unsigned)__builtin_clzll(us);   /* 4 and up */
        i = LATE_LINEAR + (octave - 4) * 8 + (unsigned)((us >> (octave - 3)) & 7);
    }
    l->count[i < LATE_BUCKETS ? i : LATE_BUCKETS - 1]++;
    l->frames++;
    if (late_ns > l->max_ns)
        l->max_ns = late_ns;
}

static uint64_t lateness_step_top_us(unsigned i)
{
    if (i < LATE_LINEAR)
        return i + 1;
    unsigned octave = 4 + (i - LATE_LINEAR) / 8, eighth = (i - LATE_LINEAR) % 8;
    return (uint64_t)(9 + eighth) << (octave - 3);
}

static uint64_t lateness_percentile_us(const struct lateness *l, unsigned pct)
{
    uint64_t rank = (l->frames * pct + 99) / 100, seen = 0;
    for (unsigned i = 0; rank && i < LATE_BUCKETS; i++)
        if ((seen += l->count[i]) >= rank)
            return lateness_step_top_us(i);
    return 0;
}

/* The lossless class (PFC), where Linux has none. The engine carries one direction of a link,
 * so it also plays the far port's ingress queue for the class: a frame of the class is
 * serialised at rate_bps when the sender is not paused, arrives delay_ns later in the far
 * port's queue, which forwards at pfc_drain_bps (below the line rate when that port is
 * congested), and leaves the engine then. Past pfc_xoff bytes queued the far port sends
 * XOFF, which stops the sender delay_ns + pfc_response_ns later; bytes still arriving land in
 * pfc_headroom, and what does not fit is dropped (pfc_dropped): the loss PFC exists to
 * prevent, when headroom is sized for a shorter cable. Below pfc_xoff / 2 it sends XON, which
 * resumes the sender delay_ns later. Frames waiting while paused stay in the sender's queue
 * (up to `limit`). Events run in time order; the sender's decisions at time t depend only on
 * the far end's state at t - delay, which is final by then, so the model is causal. */
#define PFC_CONTROL_MAX 256
#define PFC_QUEUE_MAX (1u << 16)

struct fifo { struct slot list; uint64_t count; };

struct lossless {
    struct fifo backlog, flight;          /* waiting to be serialised; on the cable */
    struct { int64_t leaves; uint32_t len; } queue[PFC_QUEUE_MAX];   /* the far ingress */
    unsigned queue_head, queue_count;
    uint64_t occupancy;
    int64_t last_leaves;
    int xoff;                             /* the far port has sent XOFF, not yet XON */
    struct { int64_t at; int pause; } control[PFC_CONTROL_MAX];   /* on the way back */
    unsigned control_head, control_count;
    int paused;
    int64_t paused_since;
};

struct engine {
    struct params p;
    struct lossless pfc;
    uint64_t loss_threshold, duplicate_threshold;   /* out of 2^32 */
    uint64_t rng;
    int64_t port_free;       /* when the serialiser is idle again (rate limiting) */
    struct wheel wheel;
    struct counters c;
    struct lateness late;
};

typedef void (*emit_fn)(struct packet *p, void *ctx);   /* owns `p` from then on */

static uint64_t next_random(struct engine *e)
{   /* splitmix64: fast, seedable, good enough for loss and jitter decisions */
    uint64_t z = (e->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int chance(struct engine *e, uint64_t threshold)
{
    return threshold && (next_random(e) >> 32) < threshold;
}

static uint64_t threshold_of(double pct)
{
    return (uint64_t)(pct / 100.0 * 4294967296.0 + 0.5);
}

static void engine_commit(struct engine *e, const struct params *p)
{
    if (p->seed != e->p.seed)
        e->rng = p->seed;
    e->p = *p;
    e->late = (struct lateness){0};
    e->c.pfc_peak = e->c.pfc_backlog_peak = 0;   /* peaks, like lateness, since the last set */
    e->loss_threshold = threshold_of(p->loss_pct);
    e->duplicate_threshold = threshold_of(p->duplicate_pct);
}

/* -- timer wheel ------------------------------------------------------------------------- */

static void slot_append(struct slot *s, struct packet *p)
{
    p->next = NULL;
    if (s->tail)
        s->tail->next = p;
    else
        s->head = p;
    s->tail = p;
}

static void wheel_insert(struct wheel *w, struct packet *p)
{
    int64_t tick = p->due >> TICK_SHIFT;
    if (tick < w->cursor)
        tick = w->cursor;    /* already due: the next drain sends it */
    slot_append(&w->slots[tick & WHEEL_MASK], p);
    if (w->queued++ == 0) {
        w->next_due = p->due;
        w->next_valid = 1;
    } else if (w->next_valid && p->due < w->next_due) {
        w->next_due = p->due;
    }
}

static void drain_slot(struct wheel *w, struct slot *s, int64_t now, emit_fn emit, void *ctx)
{
    struct packet *prev = NULL, *p = s->head;
    while (p) {
        struct packet *next = p->next;
        if (p->due <= now) {
            if (prev)
                prev->next = next;
            else
                s->head = next;
            if (s->tail == p)
                s->tail = prev;
            w->queued--;
            emit(p, ctx);
        } else {
            prev = p;
        }
        p = next;
    }
}

/* Send every frame due by `now`, in order of due time (to the slot's resolution). */
static void wheel_advance(struct wheel *w, int64_t now, emit_fn emit, void *ctx)
{
    int64_t now_tick = now >> TICK_SHIFT, from = w->cursor;
    if (now_tick - from >= (int64_t)WHEEL_SLOTS)
        from = now_tick - WHEEL_SLOTS + 1;   /* a long sleep: visit each slot once */
    for (int64_t t = from; t <= now_tick && w->queued; t++)
        drain_slot(w, &w->slots[t & WHEEL_MASK], now, emit, ctx);
    if (now_tick > w->cursor)
        w->cursor = now_tick;
    if (w->next_valid && w->next_due <= now)
        w->next_valid = 0;
}

/* Earliest due time of a queued frame, INT64_MAX if none. */
static int64_t wheel_next_due(struct wheel *w)
{
    if (!w->queued)
        return INT64_MAX;
    if (w->next_valid)
        return w->next_due;
    int64_t best = INT64_MAX;
    for (int64_t t = w->cursor; t < w->cursor + (int64_t)WHEEL_SLOTS && best == INT64_MAX; t++)
        for (struct packet *p = w->slots[t & WHEEL_MASK].head; p; p = p->next)
            if ((p->due >> TICK_SHIFT) <= t && p->due < best)
                best = p->due;
    if (best == INT64_MAX)   /* everything is more than one revolution away */
        for (uint32_t i = 0; i < WHEEL_SLOTS; i++)
            for (struct packet *p = w->slots[i].head; p; p = p->next)
                if (p->due < best)
                    best = p->due;
    w->next_due = best;
    w->next_valid = 1;
    return best;
}

/* -- what happens to one frame ------------------------------------------------------------- */

/* Decide the fate of a frame arriving at `now`; fills due[] and returns how many copies go. */
static int schedule(struct engine *e, int64_t now, uint32_t len, int64_t due[2])
{
    e->c.rx++;
    if (chance(e, e->loss_threshold)) {
        e->c.lost++;
        return 0;
    }
    int copies = 1 + chance(e, e->duplicate_threshold), n = 0;
    if (copies == 2)
        e->c.duplicated++;
    for (int i = 0; i < copies; i++) {
        if (e->wheel.queued + n >= e->p.limit) {
            e->c.overlimit++;
            continue;
        }
        int64_t sent = now;
        if (e->p.rate_bps) {   /* the egress port serialises, then the fibre propagates */
            int64_t start = e->port_free > now ? e->port_free : now;
            e->port_free = start + (int64_t)((uint64_t)len * 8000000000ULL / e->p.rate_bps);
            sent = e->port_free;
        }
        int64_t delay = e->p.delay_ns;
        if (e->p.jitter_ns)   /* uniform in [-jitter, +jitter], as netem without a table */
            delay += (int64_t)(next_random(e) % (uint64_t)(2 * e->p.jitter_ns + 1)) - e->p.jitter_ns;
        due[n++] = sent + (delay > 0 ? delay : 0);
    }
    return n;
}

static int enqueue(struct engine *e, int64_t now, const unsigned char *data, uint32_t len,
                   uint64_t index)
{
    int64_t due[2];
    int n = schedule(e, now, len, due);
    for (int i = 0; i < n; i++) {
        struct packet *p = malloc(sizeof(*p) + len);
        if (!p) {
            e->c.overlimit++;
            continue;
        }
        p->due = due[i];
        p->index = index;
        p->len = len;
        if (data)
            memcpy(p->data, data, len);
        wheel_insert(&e->wheel, p);
    }
    return n;
}

/* -- the lossless class -------------------------------------------------------------------- */

static void fifo_push(struct fifo *f, struct packet *p)
{
    slot_append(&f->list, p);
    f->count++;
}

static struct packet *fifo_pop(struct fifo *f)
{
    struct packet *p = f->list.head;
    f->list.head = p->next;
    if (!f->list.head)
        f->list.tail = NULL;
    f->count--;
    return p;
}

static int is_lossless(const struct params *p, const unsigned char *frame, uint32_t len)
{
    if (!p->pfc_xoff)
        return 0;
    if (p->pfc_dscp > 63 || !frame)   /* 64: every frame (and every simulated one) */
        return 1;
    if (len < 16)
        return 0;
    uint16_t type = (uint16_t)(frame[12] << 8 | frame[13]);
    unsigned dscp = type == ETH_P_IP ? frame[15] >> 2
                  : type == ETH_P_IPV6 ? (unsigned)((frame[14] & 0x0f) << 2 | frame[15] >> 6)
                  : 64;
    return dscp == p->pfc_dscp;
}

static void control_send(struct lossless *l, int64_t at, int pause)
{
    if (l->control_count == PFC_CONTROL_MAX)
        return;   /* cannot happen: XOFF and XON alternate, one round trip apart at least */
    unsigned last = (l->control_head + l->control_count + PFC_CONTROL_MAX - 1) % PFC_CONTROL_MAX;
    if (l->control_count && l->control[last].at > at)
        at = l->control[last].at;   /* frames of one direction never overtake each other */
    unsigned i = (l->control_head + l->control_count++) % PFC_CONTROL_MAX;
    l->control[i].at = at;
    l->control[i].pause = pause;
}

/* The far port forwards its oldest queued frame: below XON, it lets the sender go. */
static void far_forward(struct engine *e)
{
    struct lossless *l = &e->pfc;
    int64_t at = l->queue[l->queue_head].leaves;
    l->occupancy -= l->queue[l->queue_head].len;
    l->queue_head = (l->queue_head + 1) % PFC_QUEUE_MAX;
    l->queue_count--;
    if (l->xoff && l->occupancy <= e->p.pfc_xoff / 2) {
        l->xoff = 0;
        control_send(l, at + e->p.delay_ns, 0);
    }
}

/* A frame reaches the far port: queued (and sent on when that port forwards it), or dropped
 * when headroom is full; past XOFF the port pauses the sender. */
static void far_arrive(struct engine *e, struct packet *p, int64_t now)
{
    struct lossless *l = &e->pfc;
    if (l->occupancy + p->len > e->p.pfc_xoff + e->p.pfc_headroom
            || l->queue_count == PFC_QUEUE_MAX) {
        e->c.pfc_dropped++;
        free(p);
        return;
    }
    int64_t start = l->last_leaves > now ? l->last_leaves : now;
    l->last_leaves = start + (e->p.pfc_drain_bps
                              ? (int64_t)((uint64_t)p->len * 8000000000ULL / e->p.pfc_drain_bps)
                              : 0);
    unsigned i = (l->queue_head + l->queue_count++) % PFC_QUEUE_MAX;
    l->queue[i].leaves = l->last_leaves;
    l->queue[i].len = p->len;
    l->occupancy += p->len;
    if (l->occupancy > e->c.pfc_peak)
        e->c.pfc_peak = l->occupancy;
    if (!l->xoff && l->occupancy > e->p.pfc_xoff) {
        l->xoff = 1;
        e->c.pfc_pauses++;
        control_send(l, now + e->p.delay_ns + e->p.pfc_response_ns, 1);
    }
    p->due = l->last_leaves;
    wheel_insert(&e->wheel, p);
}

/* The sender starts its next frame (not while paused): serialised, then on the cable. */
static void near_send(struct engine *e, int64_t now)
{
    struct lossless *l = &e->pfc;
    struct packet *p = fifo_pop(&l->backlog);
    if (chance(e, e->loss_threshold)) {
        e->c.lost++;
        free(p);
        return;
    }
    e->port_free = now + (e->p.rate_bps   /* 0 only when a live `set` took the class away */
                          ? (int64_t)((uint64_t)p->len * 8000000000ULL / e->p.rate_bps) : 0);
    p->due = e->port_free + e->p.delay_ns;
    fifo_push(&l->flight, p);
}

static void control_arrive(struct engine *e)
{
    struct lossless *l = &e->pfc;
    int64_t at = l->control[l->control_head].at;
    int pause = l->control[l->control_head].pause;
    l->control_head = (l->control_head + 1) % PFC_CONTROL_MAX;
    l->control_count--;
    if (pause && !l->paused)
        l->paused_since = at;
    else if (!pause && l->paused)
        e->c.pfc_paused_ns += (uint64_t)(at - l->paused_since);
    if (!pause && e->port_free < at)
        e->port_free = at;   /* the next frame starts no earlier than the resume */
    l->paused = pause;
}

/* When the next event of the class happens (INT64_MAX: none pending). */
static int64_t lossless_next(const struct engine *e)
{
    const struct lossless *l = &e->pfc;
    int64_t next = INT64_MAX;
    if (l->control_count)
        next = l->control[l->control_head].at;
    if (l->flight.list.head && l->flight.list.head->due < next)
        next = l->flight.list.head->due;
    if (l->queue_count && l->queue[l->queue_head].leaves < next)
        next = l->queue[l->queue_head].leaves;
    if (l->backlog.list.head && !l->paused) {
        int64_t start = e->port_free > l->backlog.list.head->due ? e->port_free : l->backlog.list.head->due;
        if (start < next)
            next = start;
    }
    return next;
}

/* Run the class's events up to `now`, earliest first; at one time the PAUSE is taken in
 * before a frame starts, and a frame leaves the far queue before the next one arrives. */
static void lossless_advance(struct engine *e, int64_t now)
{
    struct lossless *l = &e->pfc;
    for (int64_t t; (t = lossless_next(e)) <= now;) {
        if (l->control_count && l->control[l->control_head].at == t)
            control_arrive(e);
        else if (l->queue_count && l->queue[l->queue_head].leaves == t)
            far_forward(e);
        else if (l->flight.list.head && l->flight.list.head->due == t)
            far_arrive(e, fifo_pop(&l->flight), t);
        else
            near_send(e, t);
    }
}

/* A frame of the class joins the sender's queue (stamped with its arrival there). */
static void lossless_enqueue(struct engine *e, int64_t now, const unsigned char *data,
                             uint32_t len, uint64_t index)
{
    e->c.rx++;
    e->c.pfc_rx++;
    if (e->pfc.backlog.count >= e->p.limit) {
        e->c.overlimit++;
        return;
    }
    struct packet *p = malloc(sizeof(*p) + len);
    if (!p) {
        e->c.overlimit++;
        return;
    }
    p->due = now;
    p->index = index;
    p->len = len;
    if (data)
        memcpy(p->data, data, len);
    fifo_push(&e->pfc.backlog, p);
    if (e->pfc.backlog.count > e->c.pfc_backlog_peak)
        e->c.pfc_backlog_peak = e->pfc.backlog.count;
}

static void admit(struct engine *e, int64_t now, const unsigned char *data, uint32_t len,
                  uint64_t index)
{
    if (is_lossless(&e->p, data, len)) {
        lossless_advance(e, now);   /* earlier events first: it queues behind them */
        lossless_enqueue(e, now, data, len, index);
    } else {
        enqueue(e, now, data, len, index);
    }
}

/* -- parameters ---------------------------------------------------------------------------- */

static int parse_params(char *text, struct params *p, char *err, size_t errlen)
{
    for (char *save = NULL, *tok = strtok_r(text, " \t\n", &save); tok;
         tok = strtok_r(NULL, " \t\n", &save)) {
        char *eq = strchr(tok, '='), *end;
        if (!eq) {
            snprintf(err, errlen, "%s: expected key=value", tok);
            return -1;
        }
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        errno = 0;
        double num = strtod(val, &end);
        if (errno || end == val || *end || num < 0) {
            snprintf(err, errlen, "%s=%s: expected a number >= 0", key, val);
            return -1;
        }
        if (!strcmp(key, "delay_ns")) p->delay_ns = (int64_t)num;
        else if (!strcmp(key, "jitter_ns")) p->jitter_ns = (int64_t)num;
        else if (!strcmp(key, "spin_ns")) p->spin_ns = (int64_t)num;
        else if (!strcmp(key, "batch") && num <= 1) p->batch = (int64_t)num;
        else if (!strcmp(key, "batch_ns")) p->batch_ns = (int64_t)num;
        else if (!strcmp(key, "rt_priority") && num <= 99) p->rt_priority = (int64_t)num;
        else if (!strcmp(key, "rate_bps")) p->rate_bps = (uint64_t)num;
        else if (!strcmp(key, "limit") && num >= 1) p->limit = (uint64_t)num;
        else if (!strcmp(key, "seed")) p->seed = (uint64_t)num;
        else if (!strcmp(key, "pfc_xoff")) p->pfc_xoff = (uint64_t)num;
        else if (!strcmp(key, "pfc_headroom")) p->pfc_headroom = (uint64_t)num;
        else if (!strcmp(key, "pfc_drain_bps")) p->pfc_drain_bps = (uint64_t)num;
        else if (!strcmp(key, "pfc_response_ns")) p->pfc_response_ns = (int64_t)num;
        else if (!strcmp(key, "pfc_dscp") && num <= 64) p->pfc_dscp = (uint64_t)num;
        else if ((!strcmp(key, "loss_pct") || !strcmp(key, "duplicate_pct")) && num <= 100)
            *(key[0] == 'l' ? &p->loss_pct : &p->duplicate_pct) = num;
        else {
            snprintf(err, errlen, "%s=%s: unknown key or value out of range", key, val);
            return -1;
        }
    }
    return 0;
}

static int check_params(const struct params *p, char *err, size_t errlen)
{
    if (p->pfc_xoff && (!p->rate_bps || !p->pfc_drain_bps)) {
        snprintf(err, errlen, "pfc_xoff: the lossless class needs rate_bps and pfc_drain_bps");
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct params *p)
{
    char buf[256], err[160];
    for (int i = 0; i < argc; i++) {
        snprintf(buf, sizeof(buf), "%s", argv[i]);
        if (parse_params(buf, p, err, sizeof(err))) {
            fprintf(stderr, "fl-impair: %s\n", err);
            return -1;
        }
    }
    if (check_params(p, err, sizeof(err))) {
        fprintf(stderr, "fl-impair: %s\n", err);
        return -1;
    }
    return 0;
}

static const struct params DEFAULTS = {.limit = 50000, .seed = 1, .spin_ns = 30000,
                                       .pfc_response_ns = 1000,
                                       .pfc_dscp = 64, .batch = 1, .batch_ns = 50000};

/* -- simulate: the engine without sockets, for tests ---------------------------------------- */

static void print_emit(struct packet *p, void *ctx)
{
    (void)ctx;
    printf("%" PRIu64 " %" PRId64 "\n", p->index, p->due);
}

static void print_stats(FILE *f, const struct engine *e)
{
    fprintf(f, "rx=%" PRIu64 " tx=%" PRIu64 " lost=%" PRIu64 " duplicated=%" PRIu64
            " overlimit=%" PRIu64 " tx_errors=%" PRIu64 " queued=%" PRIu64 " polled_us=%" PRIu64
            " wakeups=%" PRIu64 " late_p50_us=%" PRIu64 " late_p99_us=%" PRIu64
            " late_max_us=%" PRId64,
            e->c.rx, e->c.tx, e->c.lost, e->c.duplicated, e->c.overlimit, e->c.tx_errors,
            e->wheel.queued, e->c.polled_ns / 1000, e->c.wakeups,
            lateness_percentile_us(&e->late, 50),
            lateness_percentile_us(&e->late, 99), e->late.max_ns / 1000);
    if (e->p.pfc_xoff)
        fprintf(f, " pfc_rx=%" PRIu64 " pfc_dropped=%" PRIu64 " pfc_pauses=%" PRIu64
                " pfc_paused_us=%" PRIu64 " pfc_peak=%" PRIu64 " pfc_backlog_peak=%" PRIu64,
                e->c.pfc_rx, e->c.pfc_dropped, e->c.pfc_pauses, e->c.pfc_paused_ns / 1000,
                e->c.pfc_peak, e->c.pfc_backlog_peak);
    fputc('\n', f);
}

static void count_emit(struct packet *p, void *ctx)
{
    print_emit(p, NULL);
    ((struct engine *)ctx)->c.tx++;
    free(p);
}

static int64_t next_event(struct engine *e)
{
    int64_t wheel = wheel_next_due(&e->wheel), pfc = lossless_next(e);
    return wheel < pfc ? wheel : pfc;
}

static int simulate(struct engine *e)
{
    int64_t now;
    uint32_t len;
    uint64_t index = 0;
    while (scanf("%" SCNd64 " %" SCNu32, &now, &len) == 2) {
        lossless_advance(e, now);
        wheel_advance(&e->wheel, now, count_emit, e);
        admit(e, now, NULL, len, index++);
    }
    for (int64_t t; (t = next_event(e)) != INT64_MAX;) {
        lossless_advance(e, t);
        wheel_advance(&e->wheel, t, count_emit, e);
    }
    printf("stats ");
    print_stats(stdout, e);
    return 0;
}

/* -- run: the real forwarder --------------------------------------------------------------- */

static volatile sig_atomic_t stopping;

static void on_stop(int sig) { (void)sig; stopping = 1; }

/* How early to wake before a due time. A timed sleep ends late by the machine's wake-up
 * latency, so the engine sleeps until that much before a frame is due and polls from there.
 * The latency it learns is the 90th percentile of its sleeps' lateness (a stochastic quantile:
 * up nine steps when a sleep ends later than the estimate, down one otherwise), so a rare long
 * stall (a VM's vCPU descheduled for milliseconds, which no polling hides) barely moves it.
 * Polling is capped at a quarter of the spacing of due times: a real-time poller then takes at
 * most a quarter of a core from FRR and the traffic it delays, and it keeps sleeping, which
 * is how it keeps learning. (Learning a stall's full lateness and polling ahead by more than the
 * spacing used to leave it polling for good, starving the receivers on its core.) */
struct pacer { int64_t late_p90, spacing, last_due; };

static void learn_lateness(struct pacer *p, int64_t observed)
{
    int64_t step = p->late_p90 / 32 > 1000 ? p->late_p90 / 32 : 1000;
    p->late_p90 += observed > p->late_p90 ? 9 * step : -step;
    if (p->late_p90 < 0)
        p->late_p90 = 0;
}

/* A frame due before the last one sent (jitter, or two in one wheel slot) counts as spaced 0:
 * the spacing, and so the lead, never goes negative. */
static void learn_spacing(struct pacer *p, int64_t due)
{
    if (p->last_due)
        p->spacing += ((due > p->last_due ? due - p->last_due : 0) - p->spacing) / 16;
    if (due > p->last_due)
        p->last_due = due;
}

/* `floor`: spin_ns, which a live `set` may change. */
static int64_t lead_of(const struct pacer *p, int64_t floor)
{
    int64_t lead = p->late_p90 + p->late_p90 / 4, cap = p->spacing / 4;
    if (lead < floor)
        lead = floor;
    if (cap > SPIN_MAX_NS)
        cap = SPIN_MAX_NS;
    return lead < cap ? lead : cap;
}

/* The port's side: frames due leave together in one sendmmsg (batch=1), or one sendto each. */
struct wire {
    int fd;
    struct sockaddr_ll addr;
    struct engine *e;
    struct pacer *pacer;
    int n;
    struct packet *out[TX_BATCH];
    struct sockaddr_ll to[TX_BATCH];
    struct iovec iov[TX_BATCH];
    struct mmsghdr msgs[TX_BATCH];
};

static void count_send(int i, int err, void *ctx)
{
    struct counters *c = ctx;
    (void)i;
    *(err ? &c->tx_errors : &c->tx) += 1;
}

static void wire_flush(struct wire *w)
{
    for (int i = 0; i < w->n; i++) {
        w->iov[i] = (struct iovec){.iov_base = w->out[i]->data, .iov_len = w->out[i]->len};
        w->msgs[i].msg_hdr = (struct msghdr){.msg_name = &w->to[i],
                                             .msg_namelen = sizeof(w->to[i]),
                                             .msg_iov = &w->iov[i], .msg_iovlen = 1};
    }
    send_each(w->fd, w->msgs, w->n, count_send, &w->e->c);
    for (int i = 0; i < w->n; i++)
        free(w->out[i]);
    w->n = 0;
}

static void send_frame(struct packet *p, void *ctx)
{
    struct wire *w = ctx;
    learn_spacing(w->pacer, p->due);
    lateness_add(&w->e->late, now_ns() - p->due);
    w->to[w->n] = w->addr;
    if (p->len >= 14)
        memcpy(&w->to[w->n].sll_protocol, p->data + 12, 2);   /* the frame's own EtherType */
    w->out[w->n++] = p;
    if (w->n == TX_BATCH || !w->e->p.batch)
        wire_flush(w);
}

/* The shortest time between two wake-ups that send: frames due in between wait for the next
 * and leave together. 0 without batches, and for the lossless class, whose PAUSE frames keep
 * their times. */
static int64_t batch_window(const struct params *p)
{
    int64_t share = p->delay_ns / BATCH_SHARE;
    return p->batch && !p->pfc_xoff ? (p->batch_ns < share ? p->batch_ns : share) : 0;
}

/* How often a busy engine must read arrivals: within half the shortest delay a frame can get,
 * so none is read after it was due; 0: wake on every arrival (no batches, the lossless class,
 * or delays too short to gain from it). */
static int64_t napi_interval(const struct params *p)
{
    int64_t interval = (p->delay_ns - p->jitter_ns) / 2;
    return p->batch && !p->pfc_xoff && interval >= NAPI_MIN_NS ? interval : 0;
}

static int open_wire(const char *iface, struct sockaddr_ll *addr)
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);   /* protocol 0: transmit only */
    if (fd < 0)
        die("socket(AF_PACKET)");
    int one = 1, sndbuf = 4 << 20;
    if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) < 0)
        die("PACKET_QDISC_BYPASS");
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    *addr = (struct sockaddr_ll){.sll_family = AF_PACKET, .sll_ifindex = if_nametoindex(iface),
                                 .sll_halen = 6};
    if (!addr->sll_ifindex)
        die(iface);
    return fd;
}

/* The engine runs at nice -10: ahead of FRR and traffic generators in CPU share. A real-time
 * priority (rt_priority > 0) wakes it on time even on a loaded box, but every wake-up then
 * preempts whatever runs and nothing preempts the engine: on two cores carrying TCP through a
 * chain of engines each frame becomes its own chain of context switches (TCP over rbb-mini's
 * TE policy, iperf3 by hand: 0.029 GB/s at real-time priority, 0.070 at nice -10). */
static void apply_scheduling(const struct params *p)
{
    struct sched_param sp = {.sched_priority = (int)p->rt_priority};
    if (sched_setscheduler(0, sp.sched_priority ? SCHED_FIFO : SCHED_OTHER, &sp) < 0)
        fprintf(stderr, "fl-impair: no real-time priority (%s); delays will be noisier\n",
                strerror(errno));
    if (!sp.sched_priority && setpriority(PRIO_PROCESS, 0, -10) < 0)
        fprintf(stderr, "fl-impair: cannot run at nice -10 (%s)\n", strerror(errno));
}

static void serve_control(int listener, struct engine *e)
{
    int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char req[512], reply[512], err[160];
    ssize_t n = recv(fd, req, sizeof(req) - 1, 0);
    if (n > 0) {
        req[n] = 0;
        if (!strncmp(req, "set", 3)) {
            struct params p = e->p;
            if (parse_params(req + 3, &p, err, sizeof(err)) == 0
                    && check_params(&p, err, sizeof(err)) == 0) {
                if (p.rt_priority != e->p.rt_priority)
                    apply_scheduling(&p);
                engine_commit(e, &p);
                snprintf(reply, sizeof(reply), "ok");
            } else {
                snprintf(reply, sizeof(reply), "error %s", err);
            }
        } else if (!strncmp(req, "stats", 5)) {
            FILE *f = fmemopen(reply, sizeof(reply), "w");
            print_stats(f, e);
            fclose(f);
        } else {
            snprintf(reply, sizeof(reply), "error unknown request");
        }
        send(fd, reply, strlen(reply), MSG_NOSIGNAL);
    }
    close(fd);
}

struct capture {
    int fd;
    struct mmsghdr msgs[RX_BATCH];
    struct iovec iov[RX_BATCH];
    union { char buf[CMSG_SPACE(sizeof(struct timespec))]; struct cmsghdr align; } ctl[RX_BATCH];
    unsigned char frames[RX_BATCH][MAX_FRAME];
};

/* The kernel stamps in CLOCK_REALTIME; the wheel runs on CLOCK_MONOTONIC. A stamp never lies
 * in the future, and a frame without one arrived now. */
static int64_t arrival_ns(struct msghdr *m, int64_t realtime_minus_mono, int64_t now)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS)
            continue;
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - realtime_minus_mono;
        return t < now ? t : now;
    }
    return now;
}

/* Read what arrived (one recvmmsg); how many frames that was. */
static int receive_batch(struct capture *cap, struct engine *e)
{
    for (int i = 0; i < RX_BATCH; i++) {
        cap->iov[i] = (struct iovec){.iov_base = cap->frames[i], .iov_len = MAX_FRAME};
        cap->msgs[i].msg_hdr = (struct msghdr){.msg_iov = &cap->iov[i], .msg_iovlen = 1,
                                               .msg_control = cap->ctl[i].buf,
                                               .msg_controllen = sizeof(cap->ctl[i].buf)};
    }
    int n = recvmmsg(cap->fd, cap->msgs, RX_BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0)
        return 0;
    struct timespec rt;
    int64_t now = now_ns();
    clock_gettime(CLOCK_REALTIME, &rt);
    int64_t offset = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec - now;
    for (int i = 0; i < n; i++)
        admit(e, arrival_ns(&cap->msgs[i].msg_hdr, offset, now), cap->frames[i],
              cap->msgs[i].msg_len, e->c.rx);
    return n;
}

/* Read until the socket is empty, or RX_ROUNDS batches (the due frames must not wait behind a
 * flood; batch=0: one); how many frames that was. */
static int receive_all(struct capture *cap, struct engine *e)
{
    int total = 0, rounds = e->p.batch ? RX_ROUNDS : 1;
    for (int round = 0, n = RX_BATCH; round < rounds && n == RX_BATCH; round++)
        total += n = receive_batch(cap, e);
    return total;
}

static int run(struct engine *e, const char *iface, const char *tap, const char *ctl)
{
    static struct capture cap;
    prctl(PR_SET_TIMERSLACK, 1UL);   /* wake at the due time, not 50 us later */
    apply_scheduling(&e->p);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    struct pacer pacer = {.spacing = 2 * SPIN_MAX_NS};
    struct wire wire = {.e = e, .pacer = &pacer};
    int tapfd = sink_tap(tap, iface);
    cap.fd = tap_capture(tap, CAPTURE_BUFFER, 1);
    wire.fd = open_wire(iface, &wire.addr);
    int ctlfd = control_listen(ctl);
    printf("ready\n");
    fflush(stdout);
    int64_t stop_by = 0, wake_at = 0, polling_since = 0, read_by = 0, sent_at = 0;
    for (;;) {
        int64_t now = now_ns();
        if (wake_at) {   /* a timed sleep ended: learn how late */
            learn_lateness(&pacer, now - wake_at);
            wake_at = 0;
        }
        int64_t interval = napi_interval(&e->p);
        if (read_by && now >= read_by && cap.fd >= 0)   /* busy: read on schedule */
            read_by = receive_all(&cap, e) && interval ? now + interval : 0;
        lossless_advance(e, now);
        uint64_t sent = e->c.tx + e->c.tx_errors;
        wheel_advance(&e->wheel, now, send_frame, &wire);
        wire_flush(&wire);
        if (e->c.tx + e->c.tx_errors != sent)
            sent_at = now;
        if (stopping) {
            if (!stop_by) {
                stop_by = now + DRAIN_LIMIT_NS;
                close(cap.fd);
                close(tapfd);   /* the TAP vanishes; tc no longer has a target */
                tapfd = cap.fd = -1;
                read_by = 0;
            }
            if (next_event(e) == INT64_MAX || now > stop_by)
                break;
        }
        int64_t due = next_event(e), wait = INT64_MAX, window = batch_window(&e->p);
        if (due != INT64_MAX) {
            /* Sleep until `lead` before the due time, then poll without sleeping: the
             * wake-up latency would otherwise be added to every delay. */
            if (due < sent_at + window)
                due = sent_at + window;
            int64_t lead = lead_of(&pacer, e->p.spin_ns);
            wait = due - now > lead ? due - now - lead : 0;
        }
        int polls = !wait;
        if (read_by && read_by - now < wait) {
            wait = read_by > now ? read_by - now : 0;
            polls = 0;
        }
        struct pollfd fds[2] = {{.fd = ctlfd, .events = POLLIN},
                                {.fd = read_by ? -1 : cap.fd, .events = POLLIN}};
        struct timespec ts = {.tv_sec = wait / 1000000000LL, .tv_nsec = wait % 1000000000LL};
        struct timespec *timeout = wait == INT64_MAX ? NULL : &ts;
        int64_t asleep = now_ns();
        e->c.wakeups += !polls;   /* a sleep (polling rounds are not) */
        if (polls) {
            if (!polling_since)
                polling_since = asleep;
        } else if (polling_since) {
            e->c.polled_ns += asleep - polling_since;
            polling_since = 0;
        }
        int ready = ppoll(fds, cap.fd >= 0 ? 2 : 1, timeout, NULL);
        if (ready < 0 && errno != EINTR)
            die("ppoll");
        if (ready == 0 && wait > 0)
            wake_at = asleep + wait;
        if (fds[0].revents & POLLIN) {
            serve_control(ctlfd, e);
            read_by = 0;   /* a new delay may need arrivals sooner: read them now */
        }
        if (cap.fd >= 0 && fds[1].revents & POLLIN && receive_all(&cap, e) && interval)
            read_by = now_ns() + interval;   /* busy: the next arrivals are read on schedule */
    }
    unlink(ctl);
    return 0;
}

int main(int argc, char **argv)
{
    static struct engine e;
    struct params p = DEFAULTS;
    e.p.seed = p.seed;
    e.rng = p.seed;
    if (argc >= 2 && !strcmp(argv[1], "simulate")) {
        if (parse_args(argc - 2, argv + 2, &p))
            return 2;
        engine_commit(&e, &p);
        return simulate(&e);
    }
    if (argc >= 5 && !strcmp(argv[1], "run")) {
        if (parse_args(argc - 5, argv + 5, &p))
            return 2;
        engine_commit(&e, &p);
        return run(&e, argv[2], argv[3], argv[4]);
    }
    fprintf(stderr, "usage: fl-impair run IFACE TAP CTL_SOCKET [key=value...]\n"
                    "       fl-impair simulate [key=value...] < arrivals\n");
    return 2;
}
