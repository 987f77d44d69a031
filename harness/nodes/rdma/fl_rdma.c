/* fl-rdma: a host's RDMA NIC transport in RoCEv2 framing, over the lab's routed fabric.
 *
 * No kernel here has an RDMA device (no rxe), and a NIC's transport is what decides how
 * training traffic meets congestion and loss, so this engine is that transport. Every packet
 * is RoCEv2 on the wire: IPv4, UDP to port 4791 (the source port is the path's entropy),
 * the base transport header (opcode, destination QP, ack request, PSN), RETH on writes, AETH
 * on acknowledgements, CNPs as RoCEv2 defines them, and the invariant CRC, so scapy and
 * Wireshark dissect captures. A write's RETH names the message (VA: its id and the offset in
 * it, the DMA length: its length); the rkey field carries the packet's index in the QP's
 * stream (this responder has no memory keys). It sends through one raw IP socket per plane
 * (the node's routes carry each packet; a plane's fwmark, where given, steers it to that
 * plane) and receives on a UDP socket bound to 4791 with each packet's TOS (the ECN bits a
 * switch's WRED set) and the NIC it came in on, which it answers on.
 *
 * Two transports (transport=):
 * - roce: RC as NICs run it. One path per QP. RDMA WRITE First/Middle/Last; the responder
 *   acknowledges in order, sends a NAK (PSN sequence error) at the first gap and drops what
 *   follows; the requester goes back N on a NAK or after its ACK timeout, and fails the QP
 *   after `retry` timeouts in a row. CE-marked packets make the responder send a CNP (at most
 *   one per QP per cnp_interval), and the requester runs DCQCN on them. It relies on PFC.
 * - metaroce: a multipath transport after the public description of Meta's: a connection
 *   sprays over `paths` paths, each one UDP source port (ECMP and the planes spread them),
 *   each with its own PSN space, window and RTT estimate. Every write carries its own RETH,
 *   so the responder places a packet by its offset in whatever order it comes. The responder
 *   acknowledges a receive batch once, and a gap or a duplicate at once, with the path's
 *   cumulative PSN and a 256-packet SACK bitmap, the CE marks since its last ACK, and its
 *   fair share of its own line rate (line rate / connections sending to it) as a hint. The
 *   requester resends only what a path lost, on that same path: three later packets
 *   acknowledged past it, a packet sent a quarter RTT after it acknowledged (RACK), or the
 *   path's timeout (its oldest packet). A path with `dead_after` timeouts in a row is
 *   abandoned, what it held goes to the others, and data-free probes try it until it answers
 *   again. Congestion control is AIMD per path on ECN echoes, plus the responder's hint as a
 *   cap on the connection's rate.
 *
 * Each plane NIC serialises at rate_bps (frame, preamble, FCS and gap) and honours 802.1Qbb
 * PAUSE for the data priority, as a NIC's MAC does; the time it stayed paused is counted.
 *
 * DCQCN's parameters are the published ones (Zhu et al., SIGCOMM 2015) at their reference
 * rate ref_bps; a lab's NIC is far slower, so its times scale by ref/rate and its rate
 * steps by rate/ref: the dynamics in packets are the paper's.
 *
 *   fl-rdma key=value ...   (harness/nodes/rdma/engine.py names the keys)
 * A benchmark (iterations= or duration_ms=) runs until its messages are acknowledged and
 * nothing came for idle_ms (or until deadline_ms), then prints one JSON object with every
 * counter and timeline. Data mode (data=1 data_in=FD data_out=FD) sends what its parent
 * writes and hands back what arrives (harness/traffic/rdma_mesh.py), until data_in ends.
 */
#define _GNU_SOURCE
#define ENGINE_NAME "fl-rdma"
#include "fl_engine.h"

#include <inttypes.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>

#define ROCE_PORT 4791
#define SPORT_BASE 0xC000
#define MAX_PLANES 16
#define MAX_PEERS 64
#define MAX_CONNS 256
#define MAX_PATHS 64
#define RING 256            /* a path's packets in flight: its SACK bitmap's span */
#define WINDOW (1u << 16)   /* packets of a connection between its oldest unacknowledged and newest */
#define BATCH 64
#define MAX_BINS 4096
#define PKT_MAX 9216
#define PROBE_G UINT64_MAX  /* a probe of an abandoned path: it carries no data of the transfer */

enum { OP_WRITE_FIRST = 0x06, OP_WRITE_MIDDLE = 0x07, OP_WRITE_LAST = 0x08, OP_WRITE_ONLY = 0x0A,
       OP_ACK = 0x11, OP_CNP = 0x81 };
enum { SYN_ACK = 0x00, SYN_NAK_SEQ = 0x60 };
enum { SLOT_FREE, SLOT_OUT, SLOT_LOST, SLOT_SACKED };

/* ---- settings --------------------------------------------------------------------------- */

static struct {
    int metaroce, id, qps, paths, mtu, dscp, cnp_dscp, prio, ack_every, retry, dupthresh;
    int dead_after, hint, planes, npeers, data, data_in, data_out;
    uint64_t size, iterations, rate_bps, duration_ns, deadline_ns, idle_ns, bin_ns, start_ns;
    uint64_t timeout_ns, rto_min_ns, rto_init_ns, probe_ns, cnp_interval_ns;
    double beta;
    /* DCQCN */
    double g, alpha_ns, timer_ns, byte_reset, ai_bps, hai_bps, min_bps, ref_bps;
    int fast_stages;
    struct in_addr local[MAX_PLANES];
    char iface[MAX_PLANES][IFNAMSIZ];
    int ifindex[MAX_PLANES];
    uint32_t mark[MAX_PLANES];
    struct in_addr peer[MAX_PEERS][MAX_PLANES];
    int peer_planes[MAX_PEERS];
} cfg = {
    .qps = 1, .paths = 8, .mtu = 1024, .dscp = 26, .cnp_dscp = 48, .prio = 3, .ack_every = 8,
    .retry = 7, .dupthresh = 3, .dead_after = 3, .hint = 1, .size = 65536, .iterations = 100,
    .rate_bps = 100000000, .deadline_ns = 60000000000ULL, .idle_ns = 300000000ULL,
    .bin_ns = 10000000ULL, .timeout_ns = 67108000ULL, .rto_min_ns = 5000000ULL,
    .rto_init_ns = 100000000ULL, .probe_ns = 50000000ULL, .beta = 0.5,
    /* DCQCN, SIGCOMM 2015 at 40 Gbit/s */
    .g = 1.0 / 256, .alpha_ns = 55000, .timer_ns = 55000, .byte_reset = 10485760,
    .ai_bps = 40e6, .hai_bps = 400e6, .min_bps = 10e6, .ref_bps = 40e9, .fast_stages = 5,
    .cnp_interval_ns = 50000,
};

/* ---- state ------------------------------------------------------------------------------ */

struct slot { uint64_t g; int64_t sent; uint8_t state, retx; };

struct path {                  /* requester side of one path (metaroce) or of the QP (roce) */
    int plane, peer_plane;
    uint16_t sport;
    uint32_t nxt, una;          /* path PSNs (32-bit here, 24 on the wire) */
    struct slot ring[RING];
    double cwnd;
    int inflight, timeouts_in_row, dead;
    int64_t srtt, rttvar, rto, last_cut, next_probe, last_timeout;
    int64_t due;                /* when its timer fires, as its last check found (0: idle) */
    int64_t rack;               /* the latest send time of a packet acknowledged */
    int64_t abandoned;          /* when it was first given up (0: never) */
    int abandon_timeouts;       /* the timeouts in a row that gave it up */
    uint32_t lost[RING]; int nlost;     /* its PSNs to send again, on this path */
    uint64_t sent, retx, timeouts, ecn;
};

/* A message (one RDMA write): packets [first, first + npkts) of its QP's stream. */
struct msg { uint64_t first; uint32_t npkts, len, id; uint8_t *data; };

struct conn {                  /* a QP: requester state towards one peer */
    uint32_t qpn;
    int peer, npaths, rr, error, done;
    struct path path[MAX_PATHS];
    struct msg *msgs; uint32_t nmsgs, capmsgs, done_msgs;   /* posted, and completed */
    uint64_t posted, nxt;       /* packets of the posted messages; the next new one */
    uint64_t base;              /* oldest packet not yet acknowledged */
    uint64_t *orphans; int norphans, caporphans;   /* what abandoned paths held */
    uint8_t *acked;             /* WINDOW bits from base */
    /* roce: go-back-N over one path */
    uint64_t una_g, sent_hi; int64_t last_progress; int retries;
    /* rate: DCQCN's current and target rate, or the responder's hint */
    double rc, rt, alpha, hint_bps;
    int64_t next_send, last_alpha, last_timer;
    double bytes_since; int stage_t, stage_b;
    int64_t first, done_at, min_rtt;
    uint64_t bytes_done, msgs_done, sent, retx, naks, timeouts, cnps, ecn_echoes;
    uint64_t bins[MAX_BINS];
};

/* A message being received: its bytes (data mode) and how many have arrived. */
struct inbound { uint32_t id, len, got; uint8_t *buf; };

struct rx {                     /* responder state of one QP */
    uint32_t qpn;
    struct in_addr src;
    uint64_t base; uint8_t *placed;      /* WINDOW bits from base */
    uint64_t epsn; int nak_sent;         /* roce */
    uint32_t cur_id, cur_len, cur_off;   /* roce: the message the next in-order packet continues */
    struct inbound *in; uint32_t nin, capin, next_id;   /* delivered in id order */
    struct {                             /* metaroce: a path's receive state and its next ACK */
        uint32_t cum, ce, trig;          /* ce: marks not echoed yet; trig: the PSN that asks */
        uint8_t bits[RING / 8];
        int pending, plane;
        struct in_addr src, local;
        uint16_t sport;
    } path[MAX_PATHS];
    int64_t first, last, last_cnp;
    uint64_t packets, bytes, msgs, dup, ooo, ce, cnps, naks;
    uint64_t bins[MAX_BINS];
};

static struct conn *conns[MAX_CONNS];
static int nconns;
static struct rx *rxs[MAX_CONNS];
static int nrx;
static int raw_fd[MAX_PLANES], udp_fd, pause_fd[MAX_PLANES];
static int64_t nic_next[MAX_PLANES], paused_until[MAX_PLANES], pause_ns[MAX_PLANES];
static uint64_t pause_frames[MAX_PLANES];
static int64_t last_rx;
/* data mode: messages to send come in on the descriptor data_in (peer index, length, bytes;
 * big-endian u32s) and whole received ones go out on data_out (the sender's host id, length,
 * bytes) */
#define DATA_IN cfg.data_in
#define DATA_OUT cfg.data_out
static uint8_t *in_buf;
static size_t in_len, in_cap;
static int input_open;
static int pause_ready = 1, data_ready = 1;   /* their sockets had something at the last poll */

/* ---- helpers ---------------------------------------------------------------------------- */

/* CRC-32 (IEEE, reflected), eight bytes a step ("slicing by 8"): every packet's ICRC is
 * computed, so its cost is the engine's per-byte cost. */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = crc_table[t - 1][i] >> 8 ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                             | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16
                      | (uint32_t)p[7] << 24;
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][lo >> 8 & 0xFF]
              ^ crc_table[5][lo >> 16 & 0xFF] ^ crc_table[4][lo >> 24]
              ^ crc_table[3][hi & 0xFF] ^ crc_table[2][hi >> 8 & 0xFF]
              ^ crc_table[1][hi >> 16 & 0xFF] ^ crc_table[0][hi >> 24];
    }
    while (n--)
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

/* The invariant CRC over the packet `ip` (IPv4 header, UDP, BTH, payload; ICRC excluded) with
 * the fields a router may change masked to ones, after eight bytes of ones for the LRH. */
static uint32_t icrc(const uint8_t *ip, size_t len)
{
    static const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    uint8_t head[20 + 8 + 12];
    memcpy(head, ip, sizeof(head));
    head[1] = 0xFF;                          /* TOS */
    head[8] = 0xFF;                          /* TTL */
    head[10] = head[11] = 0xFF;              /* header checksum */
    head[26] = head[27] = 0xFF;              /* UDP checksum */
    head[28 + 4] = 0xFF;                     /* BTH FECN, BECN, reserved */
    uint32_t crc = crc32_update(0xFFFFFFFFu, ones, 8);
    crc = crc32_update(crc, head, sizeof(head));
    crc = crc32_update(crc, ip + sizeof(head), len - sizeof(head));
    return ~crc;
}

static uint16_t ip_checksum(const uint8_t *p, int n)
{
    uint32_t sum = 0;
    for (int i = 0; i < n; i += 2)
        sum += (uint32_t)p[i] << 8 | p[i + 1];
    while (sum >> 16)
        sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)~sum;
}

static void put16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static void put24(uint8_t *p, uint32_t v) { p[0] = v >> 16; p[1] = v >> 8; p[2] = v; }
static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); }
static uint32_t get24(const uint8_t *p) { return (uint32_t)p[0] << 16 | p[1] << 8 | p[2]; }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | get24(p + 1); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

static int bit(const uint8_t *bits, uint64_t i) { return bits[i >> 3] >> (i & 7) & 1; }
static void set_bit(uint8_t *bits, uint64_t i) { bits[i >> 3] |= 1 << (i & 7); }

/* A map of WINDOW packets from a base that only moves forward: packet g's bit is at
 * g mod WINDOW; `advance` clears the bits the base passes and says how far it went. */
static int seen(const uint8_t *bits, uint64_t g) { return bit(bits, g % WINDOW); }
static void mark(uint8_t *bits, uint64_t g) { set_bit(bits, g % WINDOW); }

static uint64_t advance(uint8_t *bits, uint64_t *base)
{
    uint64_t from = *base;
    while (*base < from + WINDOW && seen(bits, *base)) {
        bits[(*base % WINDOW) >> 3] &= (uint8_t)~(1 << (*base % WINDOW & 7));
        (*base)++;
    }
    return *base - from;
}

/* Bytes on the wire of an IP packet of `len` bytes: Ethernet header, FCS, preamble and gap. */
static uint64_t wire_bits(int len) { return (uint64_t)(len + 14 + 4 + 20) * 8; }

static double scale(void) { return cfg.ref_bps / (double)cfg.rate_bps; }

static int bin_of(int64_t t)
{
    int64_t b = (t - (int64_t)cfg.start_ns) / (int64_t)cfg.bin_ns;
    return b < 0 ? 0 : b >= MAX_BINS ? MAX_BINS - 1 : (int)b;
}

static void post(struct conn *c, uint32_t len, uint8_t *data)
{
    if (c->nmsgs == c->capmsgs) {
        c->capmsgs = c->capmsgs ? 2 * c->capmsgs : 256;
        c->msgs = realloc(c->msgs, c->capmsgs * sizeof(*c->msgs));
        if (!c->msgs)
            die("realloc");
    }
    uint32_t n = len ? (len + (uint32_t)cfg.mtu - 1) / (uint32_t)cfg.mtu : 1;
    c->msgs[c->nmsgs] = (struct msg){c->posted, n, len, c->nmsgs, data};
    c->nmsgs++;
    c->posted += n;
}

static struct msg *msg_of(struct conn *c, uint64_t g)   /* the message packet g belongs to */
{
    uint32_t lo = 0, hi = c->nmsgs;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (c->msgs[mid].first <= g)
            lo = mid;
        else
            hi = mid;
    }
    return &c->msgs[lo];
}

static uint32_t pkt_len(const struct msg *m, uint64_t g)   /* payload bytes of packet g */
{
    uint64_t off = (g - m->first) * (uint64_t)cfg.mtu;
    return m->len - off < (uint64_t)cfg.mtu ? (uint32_t)(m->len - off) : (uint32_t)cfg.mtu;
}

static uint16_t sport_of(uint32_t qpn, int path)
{
    return (uint16_t)(SPORT_BASE + ((qpn * MAX_PATHS + (uint32_t)path) & 0x3FFF));
}

static int path_of(uint32_t qpn, uint16_t sport)
{
    return (int)(((uint32_t)(sport - SPORT_BASE) - qpn * MAX_PATHS) & 0x3FFF);
}

/* ---- sending ---------------------------------------------------------------------------- */

/* A batch of packets per plane, each sent by that plane's socket: the multipath transport
 * alternates planes packet by packet, and one sendmmsg per plane per loop keeps a system call
 * from every packet. */
static struct out {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in to[BATCH];
    uint8_t buf[BATCH][PKT_MAX];
    int n;
} outq[MAX_PLANES];
static int cur;             /* the plane of the packet being built */

static void flush_plane(int plane)
{
    struct out *o = &outq[plane];
    int done = 0;
    while (done < o->n) {
        int n = sendmmsg(raw_fd[plane], o->msgs + done, (unsigned)(o->n - done), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;          /* no route (a plane down): the packet is lost, as on a wire */
        }
        done += n;
    }
    o->n = 0;
}

static void flush(void)
{
    for (int i = 0; i < cfg.planes; i++)
        if (outq[i].n)
            flush_plane(i);
}

/* Build IPv4/UDP/BTH in the next slot of `plane`'s batch, to leave by that plane's socket
 * (its fwmark steers it to that plane where routes alone would spray); returns where the
 * BTH's payload starts. */
static uint8_t *packet(int plane, struct in_addr src, struct in_addr dst, uint16_t sport,
                       int tos, uint8_t opcode, uint32_t qpn, int ackreq, uint32_t psn, int becn)
{
    if (outq[plane].n == BATCH)
        flush_plane(plane);
    cur = plane;
    uint8_t *p = outq[plane].buf[outq[plane].n];
    memset(p, 0, 40);
    p[0] = 0x45;
    p[1] = (uint8_t)tos;
    put16(p + 6, 0x4000);                   /* DF; the ID stays 0 */
    p[8] = 64;
    p[9] = IPPROTO_UDP;
    memcpy(p + 12, &src, 4);
    memcpy(p + 16, &dst, 4);
    put16(p + 20, sport);
    put16(p + 22, ROCE_PORT);               /* UDP checksum 0, as RoCEv2 allows */
    uint8_t *bth = p + 28;
    bth[0] = opcode;
    put16(bth + 2, 0xFFFF);
    bth[4] = becn ? 0x40 : 0;
    put24(bth + 5, qpn);
    bth[8] = ackreq ? 0x80 : 0;
    put24(bth + 9, psn & 0xFFFFFF);
    return bth + 12;
}

/* Close the packet whose payload ends at `end`: lengths, checksum, ICRC; queue it. */
static int finish(uint8_t *end)
{
    struct out *o = &outq[cur];
    int i = o->n;
    uint8_t *p = o->buf[i];
    int len = (int)(end - p) + 4;
    put16(p + 2, (uint32_t)len);
    put16(p + 24, (uint32_t)(len - 20));
    put16(p + 10, ip_checksum(p, 20));
    uint32_t crc = icrc(p, (size_t)(len - 4));
    end[0] = crc; end[1] = crc >> 8; end[2] = crc >> 16; end[3] = crc >> 24;
    o->iov[i] = (struct iovec){p, (size_t)len};
    o->to[i] = (struct sockaddr_in){.sin_family = AF_INET};
    memcpy(&o->to[i].sin_addr, p + 16, 4);
    o->msgs[i].msg_hdr = (struct msghdr){.msg_name = &o->to[i], .msg_namelen = sizeof(o->to[i]),
                                         .msg_iov = &o->iov[i], .msg_iovlen = 1};
    o->n++;
    return len;
}

/* When a paced sender's next packet may start: `next` after its last one, but a sender that
 * woke late (the scheduler's wake-up is tens of microseconds) catches up by at most
 * CATCH_UP_NS of line time, so its average is the rate and its bursts are short. */
#define CATCH_UP_NS 200000
static int64_t paced(int64_t next, int64_t now, uint64_t bits, double bps)
{
    int64_t start = next > now - CATCH_UP_NS ? next : now - CATCH_UP_NS;
    return start + (int64_t)((double)bits * 1e9 / bps);
}

/* Line time the host took, per bin: how far past something due (beyond what pacing catches
 * up) the engine woke. A NIC is never late; its emulation is when the run queue or the
 * hypervisor holds the process, and a rate is judged against the time the NIC had. */
static uint64_t held[MAX_BINS];

static void hold(int64_t from, int64_t to)
{
    while (from < to) {
        int b = bin_of(from);
        int64_t end = (int64_t)cfg.start_ns + (int64_t)(b + 1) * (int64_t)cfg.bin_ns;
        if (end <= from || b == MAX_BINS - 1)
            end = to;
        held[b] += (uint64_t)((end < to ? end : to) - from);
        from = end;
    }
}

/* A NIC takes a packet when it is not paused and has serialised the last one. */
static int nic_ready(int plane, int64_t now)
{
    return now >= nic_next[plane] && now >= paused_until[plane];
}

static void nic_sent(int plane, int len, int64_t now)
{
    nic_next[plane] = paced(nic_next[plane], now, wire_bits(len), (double)cfg.rate_bps);
}

/* Packet g of connection c on path p with path PSN psn. RETH carries where it lands: the
 * message's id and the offset in it (VA), the packet's index in the QP's stream (the rkey
 * field: this responder has no memory keys) and the message's length. RC sends it on a
 * message's first packet only; the multipath transport on every one. */
static int send_data(struct conn *c, struct path *p, uint64_t g, uint32_t psn, int64_t now)
{
    int probe = g == PROBE_G;
    struct msg *m = probe ? NULL : msg_of(c, g);
    uint64_t k = probe ? 0 : g - m->first;
    uint32_t len = probe ? 0 : pkt_len(m, g), last = probe || k == m->npkts - 1;
    uint8_t op;
    int reth;
    if (cfg.metaroce) {
        op = OP_WRITE_ONLY;
        reth = 1;
    } else {
        op = m->npkts == 1 ? OP_WRITE_ONLY : k == 0 ? OP_WRITE_FIRST
             : last ? OP_WRITE_LAST : OP_WRITE_MIDDLE;
        reth = k == 0;
    }
    /* ask for an acknowledgement every ack_every packets and at a message's end; the
     * multipath transport also when the path's window is full, and for a resend or a probe */
    int ackreq = last || (g + 1) % (uint64_t)cfg.ack_every == 0;
    if (cfg.metaroce)
        ackreq = last || (psn + 1) % (uint32_t)cfg.ack_every == 0
                 || p->inflight >= (int)p->cwnd || p->ring[psn % RING].retx;
    struct in_addr dst = cfg.peer[c->peer][p->peer_plane];
    uint8_t *q = packet(p->plane, cfg.local[p->plane], dst, p->sport, cfg.dscp << 2 | 2, op,
                        c->qpn, ackreq, psn, 0);
    if (reth) {
        put64(q, probe ? UINT64_MAX : (uint64_t)m->id << 32 | k * (uint64_t)cfg.mtu);
        put32(q + 8, (uint32_t)g);
        put32(q + 12, probe ? 0 : m->len);
        q += 16;
    }
    if (m && m->data)
        memcpy(q, m->data + k * (uint64_t)cfg.mtu, len);
    else
        memset(q, 0, len);
    int wire = finish(q + len);
    nic_sent(p->plane, wire, now);
    c->sent++;
    p->sent++;
    if (!c->first)
        c->first = now;
    return wire;
}

/* ---- requester: acknowledgement bookkeeping ---------------------------------------------- */

static void complete(struct conn *c, uint64_t g, int64_t now)
{
    if (g < c->base || g >= c->base + WINDOW || seen(c->acked, g))
        return;
    mark(c->acked, g);
    uint64_t from = c->base, n = advance(c->acked, &c->base);
    for (uint64_t i = from; i < from + n; i++) {
        uint32_t len = pkt_len(msg_of(c, i), i);
        c->bytes_done += len;
        c->bins[bin_of(now)] += len;
    }
    while (c->done_msgs < c->nmsgs
           && c->msgs[c->done_msgs].first + c->msgs[c->done_msgs].npkts <= c->base) {
        free(c->msgs[c->done_msgs].data);
        c->msgs[c->done_msgs++].data = NULL;
        c->msgs_done++;
    }
}

static void rtt_sample(struct conn *c, struct path *p, int64_t rtt)
{
    if (rtt <= 0)
        return;
    if (!c->min_rtt || rtt < c->min_rtt)
        c->min_rtt = rtt;
    if (!p->srtt) {
        p->srtt = rtt;
        p->rttvar = rtt / 2;
    } else {
        int64_t err = rtt - p->srtt;
        p->srtt += err / 8;
        p->rttvar += ((err < 0 ? -err : err) - p->rttvar) / 4;
    }
    /* the variation term is at least rto_min, as TCP's is: a path whose delay is steady
     * must not time out on a few microseconds of scheduling */
    p->rto = p->srtt + (4 * p->rttvar > (int64_t)cfg.rto_min_ns ? 4 * p->rttvar
                                                                 : (int64_t)cfg.rto_min_ns);
}

static void lose(struct path *p, struct slot *s, uint32_t psn)
{
    if (s->state == SLOT_OUT)
        p->inflight--;
    s->state = SLOT_LOST;
    p->lost[p->nlost++] = psn;      /* at most RING: one per slot, only from SLOT_OUT */
}

static void orphan(struct conn *c, uint64_t g)
{
    if (c->norphans == c->caporphans) {
        c->caporphans = c->caporphans ? 2 * c->caporphans : 64;
        c->orphans = realloc(c->orphans, (size_t)c->caporphans * sizeof(uint64_t));
        if (!c->orphans)
            die("realloc");
    }
    c->orphans[c->norphans++] = g;
}

static int live_paths(struct conn *c)
{
    int n = 0;
    for (int i = 0; i < c->npaths; i++)
        n += !c->path[i].dead;
    return n;
}

/* A path given up: what it held goes to the live ones, under their own PSNs. The responder
 * slides past the PSNs it will never see once later ones come (harness/nodes/rdma). A dead
 * path's probe that times out goes the same way, so nothing waits on a dead path. */
static void abandon(struct conn *c, struct path *p, int64_t now)
{
    if (!p->dead) {
        p->dead = 1;
        p->next_probe = now + (int64_t)cfg.probe_ns;
        if (!p->abandoned) {
            p->abandoned = now;
            p->abandon_timeouts = p->timeouts_in_row;
        }
    }
    for (uint32_t psn = p->una; psn != p->nxt; psn++) {
        struct slot *s = &p->ring[psn % RING];
        if ((s->state == SLOT_OUT || s->state == SLOT_LOST) && s->g != PROBE_G)
            orphan(c, s->g);
        s->state = SLOT_FREE;
    }
    p->una = p->nxt;
    p->inflight = p->nlost = 0;
}

static void metaroce_ack(struct conn *c, struct path *p, const uint8_t *bth, int len, int64_t now)
{
    if (len < 12 + 4 + 40)
        return;
    const uint8_t *ext = bth + 16;
    uint32_t cum = get32(ext), trig = get32(ext + 4);
    int ce = ext[8];
    uint32_t hint_kbps = get32(ext + 12);
    const uint8_t *bits = ext + 16;          /* RING bits, psn cum+1 .. */
    if (cfg.hint && hint_kbps)
        c->hint_bps = hint_kbps * 1000.0;
    struct slot *t = &p->ring[trig % RING];
    if (t->state == SLOT_OUT && !t->retx && trig - p->una < RING)
        rtt_sample(c, p, now - t->sent);
    int progressed = 0;
    uint32_t highest = cum - 1;
    for (uint32_t psn = p->una; (int32_t)(psn - p->nxt) < 0; psn++) {
        struct slot *s = &p->ring[psn % RING];
        uint32_t off = psn - cum;
        int acked = (int32_t)(psn - cum) < 0 || (off >= 1 && off < RING && bit(bits, off - 1));
        if (!acked)
            continue;
        if ((int32_t)(psn - highest) > 0)
            highest = psn;
        if (s->state == SLOT_OUT || s->state == SLOT_LOST) {
            if (s->state == SLOT_OUT)
                p->inflight--;
            if (s->sent > p->rack)
                p->rack = s->sent;
            s->state = SLOT_SACKED;
            if (s->g != PROBE_G)
                complete(c, s->g, now);
            progressed = 1;
            p->cwnd += 1.0 / p->cwnd;
        }
    }
    while (p->una != p->nxt && (p->ring[p->una % RING].state == SLOT_SACKED
                                || p->ring[p->una % RING].state == SLOT_FREE)) {
        p->ring[p->una % RING].state = SLOT_FREE;
        p->una++;
    }
    /* Lost: a first copy with dupthresh later PSNs acknowledged on its path, or any copy
     * when a packet sent a quarter RTT after it was acknowledged (a path keeps its order;
     * a resent packet's PSN is old, so only send times can judge it, as RACK does). */
    for (uint32_t psn = p->una; psn != p->nxt; psn++) {
        struct slot *s = &p->ring[psn % RING];
        if (s->state == SLOT_OUT
            && ((!s->retx && (int32_t)(psn + (uint32_t)cfg.dupthresh - highest) <= 0)
                || p->rack - s->sent > p->srtt / 4))
            lose(p, s, psn);
    }
    if (progressed) {
        p->timeouts_in_row = 0;
        if (p->dead) {
            p->dead = 0;
            p->cwnd = 1;
        }
    }
    if (ce) {
        c->ecn_echoes += (uint64_t)ce;
        p->ecn += (uint64_t)ce;
        if (now - p->last_cut > (p->srtt ? p->srtt : p->rto)) {
            p->cwnd *= 1 - cfg.beta;
            if (p->cwnd < 1)
                p->cwnd = 1;
            p->last_cut = now;
        }
    }
    if (p->cwnd > RING - 1)
        p->cwnd = RING - 1;
}

/* DCQCN at the reaction point: a CNP cuts the rate and remembers the target. */
static void dcqcn_cnp(struct conn *c, int64_t now)
{
    c->cnps++;
    c->rt = c->rc;
    c->rc *= 1 - c->alpha / 2;
    if (c->rc < cfg.min_bps / scale())
        c->rc = cfg.min_bps / scale();
    c->alpha = (1 - cfg.g) * c->alpha + cfg.g;
    c->last_alpha = c->last_timer = now;   /* a CNP restarts alpha's decay and the increases */
    c->bytes_since = 0;
    c->stage_t = c->stage_b = 0;
}

static void dcqcn_increase(struct conn *c)
{
    int lo = c->stage_t < c->stage_b ? c->stage_t : c->stage_b;
    int hi = c->stage_t > c->stage_b ? c->stage_t : c->stage_b;
    if (hi < cfg.fast_stages)
        ;                                   /* fast recovery: towards the target only */
    else if (lo >= cfg.fast_stages)
        c->rt += (lo - cfg.fast_stages + 1) * cfg.hai_bps / scale();
    else
        c->rt += cfg.ai_bps / scale();
    if (c->rt > cfg.rate_bps)
        c->rt = cfg.rate_bps;
    c->rc = (c->rt + c->rc) / 2;
}

static void dcqcn_timers(struct conn *c, int64_t now)
{
    double s = scale();
    while (now - c->last_alpha >= (int64_t)(cfg.alpha_ns * s)) {
        c->last_alpha += (int64_t)(cfg.alpha_ns * s);
        c->alpha *= 1 - cfg.g;
    }
    while (now - c->last_timer >= (int64_t)(cfg.timer_ns * s)) {
        c->last_timer += (int64_t)(cfg.timer_ns * s);
        c->stage_t++;
        dcqcn_increase(c);
    }
}

static void roce_ack(struct conn *c, const uint8_t *bth, int64_t now)
{
    uint8_t syndrome = bth[12];
    uint32_t psn = get24(bth + 9);
    uint32_t d = (psn - (uint32_t)c->una_g) & 0xFFFFFF;
    int nak = (syndrome & 0xE0) == SYN_NAK_SEQ;
    /* the PSN's global packet: the one nearest at or above una_g (an ACK may name una_g - 1) */
    if (d >= (1u << 23))
        return;                               /* older than what is acknowledged */
    uint64_t g = c->una_g + d;
    if (g >= c->sent_hi + !nak)
        return;
    if (nak) {
        c->naks++;
        for (uint64_t i = c->una_g; i < g; i++)
            complete(c, i, now);
        c->una_g = g;
        c->nxt = g;                           /* go back N */
        c->last_progress = now;
        c->retries = 0;
        return;
    }
    struct path *p = &c->path[0];
    struct slot *s = &p->ring[g % RING];
    if (s->g == g && !s->retx && s->state == SLOT_OUT) {
        rtt_sample(c, p, now - s->sent);
        s->state = SLOT_FREE;
    }
    for (uint64_t i = c->una_g; i <= g; i++)
        complete(c, i, now);
    if (g + 1 > c->una_g) {
        c->una_g = g + 1;
        c->last_progress = now;
        c->retries = 0;
    }
    if (c->nxt < c->una_g)
        c->nxt = c->una_g;
}

/* ---- responder ---------------------------------------------------------------------------- */

static struct rx *rx_of(uint32_t qpn, struct in_addr src)
{
    for (int i = 0; i < nrx; i++)
        if (rxs[i]->qpn == qpn)
            return rxs[i];
    if (nrx == MAX_CONNS)
        return NULL;
    struct rx *r = calloc(1, sizeof(*r));
    if (!r || !(r->placed = calloc(WINDOW / 8, 1)))
        die("calloc");
    r->qpn = qpn;
    r->src = src;
    return rxs[nrx++] = r;
}

static int active_senders(int64_t now)
{
    int n = 0;
    for (int i = 0; i < nrx; i++)
        n += now - rxs[i]->last < 10 * (int64_t)cfg.bin_ns;
    return n ? n : 1;
}

/* Place global packet g; 0 if it was already there (a duplicate). */
static int place(struct rx *r, uint64_t g, uint32_t len, int64_t now)
{
    if (g < r->base || g >= r->base + WINDOW || seen(r->placed, g))
        return 0;
    mark(r->placed, g);
    r->bytes += len;
    r->bins[bin_of(now)] += len;
    advance(r->placed, &r->base);
    return 1;
}

static void write_all(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("data out");
        p = (const uint8_t *)p + w;
        n -= (size_t)w;
    }
}

/* `n` bytes at `off` of message `id` (`len` long) arrived; whole messages leave in id order
 * (to DATA_OUT in data mode), as an RC completion queue hands them over. */
static void arrive(struct rx *r, uint32_t id, uint32_t len, uint32_t off, const uint8_t *bytes,
                   uint32_t n)
{
    struct inbound *m = NULL;
    for (uint32_t i = 0; i < r->nin && !m; i++)
        if (r->in[i].id == id)
            m = &r->in[i];
    if (!m) {
        if (id < r->next_id || off + n > len)
            return;
        if (r->nin == r->capin) {
            r->capin = r->capin ? 2 * r->capin : 16;
            r->in = realloc(r->in, r->capin * sizeof(*r->in));
            if (!r->in)
                die("realloc");
        }
        m = &r->in[r->nin++];
        *m = (struct inbound){id, len, 0, NULL};
        if (cfg.data && len && !(m->buf = malloc(len)))
            die("malloc");
    }
    if (m->buf)
        memcpy(m->buf + off, bytes, n);
    m->got += n;
    for (int again = 1; again;) {
        again = 0;
        for (uint32_t i = 0; i < r->nin; i++) {
            struct inbound *d = &r->in[i];
            if (d->id != r->next_id || d->got < d->len)
                continue;
            if (cfg.data) {
                uint8_t head[8];
                put32(head, r->qpn >> 12);
                put32(head + 4, d->len);
                write_all(DATA_OUT, head, 8);
                write_all(DATA_OUT, d->buf, d->len);
            }
            free(d->buf);
            r->in[i] = r->in[--r->nin];
            r->next_id++;
            r->msgs++;
            again = 1;
            break;
        }
    }
}

/* A path's receive state: `cum` is the next PSN expected, bit i-1 of `bits` says cum+i came.
 * A PSN a full ring ahead means the requester gave the ones before up (an abandoned path):
 * the window slides past them. */
static void track(uint32_t *cum, uint8_t *bits, uint32_t psn24, uint64_t *ooo)
{
    uint32_t off = (psn24 - *cum) & 0xFFFFFF;
    if (off >= (1u << 23))
        return;                                   /* old: already below cum */
    if (off >= RING) {
        uint32_t shift = off - RING + 1;
        uint8_t tmp[RING / 8] = {0};
        for (uint32_t i = shift + 1; i < RING; i++)
            if (bit(bits, i - 1))
                set_bit(tmp, i - shift - 1);
        memcpy(bits, tmp, RING / 8);
        *cum += shift;
        off = RING - 1;
    }
    if (off > 0) {
        (*ooo)++;
        set_bit(bits, off - 1);
        return;
    }
    uint32_t n = 1;
    while (n < RING && bit(bits, n - 1))
        n++;
    uint8_t tmp[RING / 8] = {0};
    for (uint32_t i = n + 1; i < RING; i++)
        if (bit(bits, i - 1))
            set_bit(tmp, i - n - 1);
    memcpy(bits, tmp, RING / 8);
    *cum += n;
}

static void send_cnp(struct rx *r, int plane, struct in_addr local, int64_t now)
{
    if (now - r->last_cnp < (int64_t)(cfg.cnp_interval_ns * (cfg.metaroce ? 1 : scale())))
        return;
    r->last_cnp = now;
    r->cnps++;
    uint8_t *q = packet(plane, local, r->src, sport_of(r->qpn, 0), cfg.cnp_dscp << 2, OP_CNP,
                        r->qpn, 0, 0, 1);
    memset(q, 0, 16);
    finish(q + 16);
}

#define MAX_PENDING (BATCH * 4)
static struct pending { struct rx *r; int path; } pending[MAX_PENDING];
static int npending;
static void ack_path(struct rx *r, int p, int64_t now);

/* A write that came in on `plane` (answered on that plane) for `local`. */
static void responder(const uint8_t *bth, int len, struct in_addr src, int plane,
                      struct in_addr local, uint16_t sport, int ce, int64_t now)
{
    uint8_t op = bth[0];
    uint32_t qpn = get24(bth + 5), psn = get24(bth + 9);
    int reth = cfg.metaroce || op == OP_WRITE_FIRST || op == OP_WRITE_ONLY;
    if (len < 12 + (reth ? 16 : 0) + 4)
        return;
    struct rx *r = rx_of(qpn, src);
    if (!r)
        return;
    r->src = src;
    r->packets++;
    r->last = last_rx = now;
    if (!r->first)
        r->first = now;
    if (ce)
        r->ce++;
    const uint8_t *data = bth + 12 + (reth ? 16 : 0);
    uint64_t va = reth ? get64(bth + 12) : 0;
    uint32_t key = reth ? get32(bth + 20) : 0, mlen = reth ? get32(bth + 24) : 0;
    uint32_t plen = (uint32_t)(len - 12 - (reth ? 16 : 0) - 4);
    if (ce && !cfg.metaroce)
        send_cnp(r, plane, local, now);
    if (!cfg.metaroce) {
        uint64_t epsn = r->epsn;
        uint32_t want = (uint32_t)epsn & 0xFFFFFF;
        uint32_t d = (psn - want) & 0xFFFFFF;
        uint8_t syndrome;
        uint32_t apsn;
        if (d == 0) {
            if (reth) {
                r->cur_id = (uint32_t)(va >> 32);
                r->cur_len = mlen;
                r->cur_off = 0;
            }
            place(r, r->epsn, plen, now);
            arrive(r, r->cur_id, r->cur_len, r->cur_off, data, plen);
            r->cur_off += plen;
            r->epsn++;
            r->nak_sent = 0;
            if (!(bth[8] & 0x80))
                return;
            syndrome = SYN_ACK;
            apsn = want;
        } else if (d < (1u << 23)) {
            r->ooo++;
            if (r->nak_sent)
                return;
            r->nak_sent = 1;
            r->naks++;
            syndrome = SYN_NAK_SEQ;
            apsn = want;
        } else {
            r->dup++;
            syndrome = SYN_ACK;
            apsn = (want - 1) & 0xFFFFFF;
        }
        uint8_t *q = packet(plane, local, src, sport, cfg.dscp << 2, OP_ACK, qpn, 0, apsn, 0);
        q[0] = syndrome;
        put24(q + 1, (uint32_t)r->msgs);
        finish(q + 4);
        return;
    }
    int p = path_of(qpn, sport);
    if (p >= MAX_PATHS)
        return;
    int now_ack = 0;                 /* a duplicate: the requester must hear at once */
    if (va != UINT64_MAX) {          /* not a probe */
        uint64_t g = r->base + (uint64_t)(int64_t)(int32_t)(key - (uint32_t)r->base);
        if (place(r, g, plen, now)) {
            arrive(r, (uint32_t)(va >> 32), mlen, (uint32_t)va, data, plen);
        } else {
            r->dup++;
            now_ack = 1;
        }
    }
    uint64_t ooo = r->ooo;
    track(&r->path[p].cum, r->path[p].bits, psn, &r->ooo);
    typeof(r->path[0]) *rp = &r->path[p];
    rp->ce += (uint32_t)ce;
    rp->trig = psn;
    rp->plane = plane;
    rp->src = src;
    rp->local = local;
    rp->sport = sport;
    /* a gap or a duplicate is acknowledged at once (the requester's SACK); the rest once
     * this receive batch is done, so a busy path's packets share one ACK */
    if (now_ack || r->ooo != ooo || (!rp->pending && npending == MAX_PENDING)) {
        ack_path(r, p, now);
    } else if (!rp->pending) {
        pending[npending++] = (struct pending){r, p};
        rp->pending = 1;
    }
}

/* The path's ACK: its cumulative PSN, the SACK bitmap after it, the PSN that asked, the CE
 * marks since the last ACK, and the responder's fair share of its line rate (in kbit/s). */
static void ack_path(struct rx *r, int p, int64_t now)
{
    typeof(r->path[0]) *rp = &r->path[p];
    rp->pending = 0;
    uint8_t *q = packet(rp->plane, rp->local, rp->src, rp->sport, cfg.dscp << 2, OP_ACK, r->qpn,
                        0, rp->cum - 1, 0);
    q[0] = SYN_ACK;
    put24(q + 1, (uint32_t)r->msgs);
    uint8_t *ext = q + 4;
    memset(ext, 0, 40);
    put32(ext, rp->cum);
    put32(ext + 4, rp->trig);
    ext[8] = (uint8_t)(rp->ce > 255 ? 255 : rp->ce);
    rp->ce = 0;
    uint64_t share = cfg.rate_bps * (uint64_t)cfg.planes / (uint64_t)active_senders(now);
    put32(ext + 12, (uint32_t)(share / 1000));
    memcpy(ext + 16, rp->bits, RING / 8);
    finish(ext + 16 + RING / 8);
}

static void ack_pending(int64_t now)
{
    for (int i = 0; i < npending; i++)
        if (pending[i].r->path[pending[i].path].pending)
            ack_path(pending[i].r, pending[i].path, now);
    npending = 0;
}

/* ---- receive ------------------------------------------------------------------------------ */

static void requester(const uint8_t *bth, int len, uint16_t dport_sport, int64_t now)
{
    uint32_t qpn = get24(bth + 5);
    struct conn *c = NULL;
    for (int i = 0; i < nconns; i++)
        if (conns[i]->qpn == qpn)
            c = conns[i];
    if (!c)
        return;
    if (bth[0] == OP_CNP) {
        if (cfg.metaroce)
            c->cnps++;
        else
            dcqcn_cnp(c, now);
        return;
    }
    if (len < 16)
        return;
    if (cfg.metaroce) {
        int p = path_of(qpn, dport_sport);
        if (p < c->npaths)
            metaroce_ack(c, &c->path[p], bth, len, now);
    } else {
        roce_ack(c, bth, now);
    }
}

static void receive(int64_t now)
{
    static struct mmsghdr msgs[BATCH];
    static struct iovec iov[BATCH];
    static struct sockaddr_in from[BATCH];
    static uint8_t buf[BATCH][PKT_MAX];
    static char control[BATCH][CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){buf[i], PKT_MAX};
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof(from[i]),
                .msg_iov = &iov[i], .msg_iovlen = 1, .msg_control = control[i],
                .msg_controllen = sizeof(control[i])};
        }
        int n = recvmmsg(udp_fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) {
            ack_pending(now);
            return;
        }
        for (int i = 0; i < n; i++) {
            int len = (int)msgs[i].msg_len, tos = 0, plane = 0;
            struct in_addr local = cfg.local[0];
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
                 cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
                if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
                    tos = *(uint8_t *)CMSG_DATA(cm);
                if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
                    struct in_pktinfo *info = (struct in_pktinfo *)CMSG_DATA(cm);
                    local = info->ipi_addr;
                    for (int k = 0; k < cfg.planes; k++)
                        if (cfg.ifindex[k] == info->ipi_ifindex)
                            plane = k;
                }
            }
            if (len < 12 + 4)
                continue;
            uint8_t op = buf[i][0];
            uint16_t sport = ntohs(from[i].sin_port);
            if (op == OP_ACK || op == OP_CNP)
                requester(buf[i], len, sport, now);
            else if (op >= OP_WRITE_FIRST && op <= OP_WRITE_ONLY)
                responder(buf[i], len, from[i].sin_addr, plane, local, sport, (tos & 3) == 3,
                          now);
        }
    }
}

static void pauses(int64_t now)
{
    uint8_t f[128];
    for (int i = 0; i < cfg.planes; i++) {
        ssize_t n;
        while (pause_fd[i] >= 0 && (n = recv(pause_fd[i], f, sizeof(f), MSG_DONTWAIT)) >= 20) {
            if (f[12] != 0x88 || f[13] != 0x08)
                continue;
            uint16_t opcode = (uint16_t)(f[14] << 8 | f[15]);
            uint32_t quanta;
            if (opcode == 0x0101) {
                if (!(f[17] >> cfg.prio & 1))
                    continue;
                quanta = (uint32_t)(f[18 + 2 * cfg.prio] << 8 | f[19 + 2 * cfg.prio]);
            } else if (opcode == 0x0001) {
                quanta = (uint32_t)(f[16] << 8 | f[17]);
            } else {
                continue;
            }
            pause_frames[i]++;
            int64_t until = now + (int64_t)((uint64_t)quanta * 512 * 1000000000ULL / cfg.rate_bps);
            int64_t from = paused_until[i] > now ? paused_until[i] : now;
            if (until > from)
                pause_ns[i] += until - from;
            else if (quanta == 0 && paused_until[i] > now)
                pause_ns[i] -= paused_until[i] - now;     /* XON ends it early */
            paused_until[i] = quanta ? (until > paused_until[i] ? until : paused_until[i]) : now;
        }
    }
}

/* ---- the requester's sending ---------------------------------------------------------------- */

/* Whether the workload has more messages: a benchmark's `iterations` of `size` bytes, or as
 * many as its duration allows; in data mode, whatever the parent still sends. */
static int more_to_post(struct conn *c, int64_t now)
{
    if (cfg.data)
        return input_open;
    return cfg.iterations ? c->nmsgs < cfg.iterations
                          : now < (int64_t)(cfg.start_ns + cfg.duration_ns);
}

static int may_post(struct conn *c, int64_t now)   /* a new packet may start */
{
    if (c->error || c->nxt >= c->base + WINDOW)
        return 0;
    if (c->nxt == c->posted && !cfg.data && more_to_post(c, now))
        post(c, (uint32_t)cfg.size, NULL);
    return c->nxt < c->posted;
}

/* Every message it will have is posted and acknowledged. */
static int finished(struct conn *c, int64_t now)
{
    return !more_to_post(c, now) && c->base >= c->posted;
}

static void pace(struct conn *c, int len, int64_t now)
{
    double rate = cfg.metaroce ? (c->hint_bps ? c->hint_bps : 1e18) : c->rc;
    c->next_send = paced(c->next_send, now, wire_bits(len), rate);
    if (!cfg.metaroce)
        c->bytes_since += len;
}

/* One packet of QP c if its rate and NIC allow: 1 if it sent. */
static int roce_send_one(struct conn *c, int64_t now)
{
    struct path *p = &c->path[0];
    if (c->error || now < c->next_send || !nic_ready(p->plane, now))
        return 0;
    if (c->una_g < c->nxt && now - c->last_progress > (int64_t)cfg.timeout_ns) {
        c->timeouts++;
        if (++c->retries > cfg.retry) {
            c->error = 1;                     /* retry exceeded: the QP goes to error */
            return 0;
        }
        c->nxt = c->una_g;
        c->last_progress = now;
    }
    int resend = c->nxt < c->sent_hi;
    if (!resend && !may_post(c, now))
        return 0;
    if (c->nxt == c->una_g)
        c->last_progress = now;
    struct slot *s = &p->ring[c->nxt % RING];
    *s = (struct slot){.g = c->nxt, .sent = now, .state = SLOT_OUT, .retx = (uint8_t)resend};
    int wire = send_data(c, p, c->nxt, (uint32_t)c->nxt, now);
    if (resend) {
        c->retx++;
        p->retx++;
    }
    c->nxt++;
    if (c->nxt > c->sent_hi)
        c->sent_hi = c->nxt;
    pace(c, wire, now);
    if (c->bytes_since >= cfg.byte_reset) {
        c->bytes_since = 0;
        c->stage_b++;
        dcqcn_increase(c);
    }
    return 1;
}

static void roce_send(struct conn *c, int64_t now)
{
    for (int i = 0; i < BATCH && roce_send_one(c, now); i++)
        ;
}

/* A path's timer runs from its oldest packet out, and from its last timeout. A timeout
 * resends only that oldest packet (what the stall was, or the first of a tail's losses):
 * once it is acknowledged, RACK finds the others a real loss took; if the stall was the
 * responder's (a scheduler's), one packet arrives twice, not the window. */
static void path_timeout(struct conn *c, struct path *p, int64_t now)
{
    p->due = 0;
    if (!p->inflight)
        return;
    struct slot *oldest = NULL;
    uint32_t oldest_psn = 0;
    for (uint32_t psn = p->una; psn != p->nxt; psn++) {
        struct slot *s = &p->ring[psn % RING];
        if (s->state == SLOT_OUT && (!oldest || s->sent < oldest->sent)) {
            oldest = s;
            oldest_psn = psn;
        }
    }
    int64_t from = oldest->sent > p->last_timeout ? oldest->sent : p->last_timeout;
    p->due = from + p->rto + 1;
    if (now - from < p->rto)
        return;
    p->timeouts++;
    c->timeouts++;
    p->last_timeout = now;
    p->due = now + p->rto + 1;
    lose(p, oldest, oldest_psn);
    p->cwnd = 1;
    /* no backoff while the path may still be judged: dead_after timeouts of its RTT decide
     * it; an abandoned path's probes are paced by probe_ms instead. The last live path is
     * never abandoned: it backs off and keeps trying. */
    if (++p->timeouts_in_row >= cfg.dead_after && (p->dead || live_paths(c) > 1))
        abandon(c, p, now);
    else if (p->timeouts_in_row >= cfg.dead_after)
        p->rto = p->rto * 2 > 2000000000LL ? 2000000000LL : p->rto * 2;
}

static void metaroce_send(struct conn *c, int64_t now)
{
    for (int i = 0; i < c->npaths; i++)
        path_timeout(c, &c->path[i], now);
    for (int tries = 0, idle = 0; tries < BATCH * c->npaths && idle < c->npaths; tries++, idle++) {
        if (now < c->next_send)
            return;
        struct path *p = &c->path[c->rr];
        c->rr = (c->rr + 1) % c->npaths;
        int probe = p->dead && now >= p->next_probe && !p->inflight;
        if ((p->dead && !probe) || !nic_ready(p->plane, now) || p->inflight >= (int)p->cwnd)
            continue;
        if (p->nlost) {             /* only what this path lost, oldest first, under its PSN */
            uint32_t psn = p->lost[0];
            memmove(p->lost, p->lost + 1, (size_t)--p->nlost * sizeof(p->lost[0]));
            struct slot *s = &p->ring[psn % RING];
            if (s->state != SLOT_LOST || s->g == PROBE_G) {
                if (s->state == SLOT_LOST)
                    s->state = SLOT_SACKED;   /* a lost probe is not sent again */
                continue;
            }
            s->state = SLOT_OUT;
            s->sent = now;
            s->retx = 1;
            p->inflight++;
            pace(c, send_data(c, p, s->g, psn, now), now);
            c->retx++;
            p->retx++;
            idle = -1;
            continue;
        }
        if (p->nxt - p->una >= RING - 1)
            continue;
        uint64_t g = PROBE_G;
        int resend = 0;
        if (probe) {
            p->next_probe = now + (int64_t)cfg.probe_ns;
        } else {
            while (c->norphans && !resend) {
                g = c->orphans[--c->norphans];
                resend = g >= c->base && !seen(c->acked, g);
            }
            if (!resend) {
                if (!may_post(c, now))
                    continue;
                g = c->nxt++;
            }
        }
        struct slot *s = &p->ring[p->nxt % RING];
        *s = (struct slot){.g = g, .sent = now, .state = SLOT_OUT, .retx = (uint8_t)resend};
        p->inflight++;
        int wire = send_data(c, p, g, p->nxt, now);
        p->nxt++;
        if (resend) {
            c->retx++;
            p->retx++;
        }
        pace(c, wire, now);
        idle = -1;
    }
}

/* Messages the parent gives (data mode): whole frames become messages of the peer's QP. */
static void take_input(void)
{
    for (;;) {
        if (in_cap - in_len < 65536) {
            in_cap = in_cap ? 2 * in_cap : 1 << 20;
            if (!(in_buf = realloc(in_buf, in_cap)))
                die("realloc");
        }
        ssize_t n = read(DATA_IN, in_buf + in_len, in_cap - in_len);
        if (n == 0)
            input_open = 0;
        if (n <= 0)
            break;
        in_len += (size_t)n;
    }
    size_t at = 0;
    while (in_len - at >= 8) {
        uint32_t peer = get32(in_buf + at), len = get32(in_buf + at + 4);
        if (in_len - at - 8 < len)
            break;
        if (peer >= (uint32_t)nconns) {
            fprintf(stderr, ENGINE_NAME ": data for peer %u of %d\n", peer, nconns);
            exit(2);
        }
        uint8_t *data = len ? malloc(len) : NULL;
        if (len && !data)
            die("malloc");
        if (len)
            memcpy(data, in_buf + at + 8, len);
        post(conns[peer], len, data);
        at += 8 + len;
    }
    memmove(in_buf, in_buf + at, in_len - at);
    in_len -= at;
}

/* ---- set-up, main loop, report -------------------------------------------------------------- */

static int parse_addrs(const char *s, struct in_addr *out, int max, char sep)
{
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save, *tok = strtok_r(buf, (char[]){sep, 0}, &save); tok;
         tok = strtok_r(NULL, (char[]){sep, 0}, &save)) {
        if (n == max || inet_pton(AF_INET, tok, &out[n]) != 1) {
            fprintf(stderr, ENGINE_NAME ": not an IPv4 address (or too many): %s\n", tok);
            exit(2);
        }
        n++;
    }
    return n;
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, ENGINE_NAME ": expected key=value, got %s\n", argv[i]);
            exit(2);
        }
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        double d = strtod(v, NULL);
        uint64_t u = strtoull(v, NULL, 10);
#define INT(name) else if (!strcmp(k, #name)) cfg.name = (int)u
#define U64(name) else if (!strcmp(k, #name)) cfg.name = u
#define DBL(name) else if (!strcmp(k, #name)) cfg.name = d
#define US(name) else if (!strcmp(k, #name "_us")) cfg.name##_ns = u * 1000
#define MS(name) else if (!strcmp(k, #name "_ms")) cfg.name##_ns = u * 1000000
        if (!strcmp(k, "transport")) {
            if (strcmp(v, "roce") && strcmp(v, "metaroce")) {
                fprintf(stderr, ENGINE_NAME ": transport is roce or metaroce, not %s\n", v);
                exit(2);
            }
            cfg.metaroce = !strcmp(v, "metaroce");
        } else if (!strcmp(k, "local")) {
            cfg.planes = parse_addrs(v, cfg.local, MAX_PLANES, ',');
        } else if (!strcmp(k, "ifaces")) {
            char buf[512], *save;
            int n = 0;
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *t = strtok_r(buf, ",", &save); t && n < MAX_PLANES; t = strtok_r(NULL, ",", &save))
                snprintf(cfg.iface[n++], IFNAMSIZ, "%s", t);
        } else if (!strcmp(k, "marks")) {
            char buf[512], *save;
            int n = 0;
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *t = strtok_r(buf, ",", &save); t && n < MAX_PLANES; t = strtok_r(NULL, ",", &save))
                cfg.mark[n++] = (uint32_t)strtoul(t, NULL, 0);
        } else if (!strcmp(k, "peers")) {
            char buf[4096], *save;
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *t = strtok_r(buf, ",", &save); t && cfg.npeers < MAX_PEERS;
                 t = strtok_r(NULL, ",", &save)) {
                cfg.peer_planes[cfg.npeers] = parse_addrs(t, cfg.peer[cfg.npeers], MAX_PLANES, '/');
                cfg.npeers++;
            }
        } else if (!strcmp(k, "alpha_us")) cfg.alpha_ns = d * 1000;
        else if (!strcmp(k, "timer_us")) cfg.timer_ns = d * 1000;
        INT(id); INT(data); INT(data_in); INT(data_out); INT(qps); INT(paths); INT(mtu); INT(dscp); INT(cnp_dscp); INT(prio);
        INT(ack_every); INT(retry); INT(dupthresh); INT(dead_after); INT(hint); INT(fast_stages);
        U64(size); U64(iterations); U64(rate_bps); U64(start_ns);
        MS(duration); MS(deadline); MS(idle); MS(bin); MS(probe);
        US(timeout); US(rto_min); US(rto_init); US(cnp_interval);
        DBL(beta); DBL(g); DBL(byte_reset); DBL(ai_bps); DBL(hai_bps); DBL(min_bps); DBL(ref_bps);
        else {
            fprintf(stderr, ENGINE_NAME ": unknown key %s\n", k);
            exit(2);
        }
    }
    if (!cfg.planes || cfg.paths < 1 || cfg.paths > MAX_PATHS || cfg.mtu < 64
        || cfg.mtu > PKT_MAX - 100 || !cfg.size || !cfg.rate_bps || cfg.prio > 7
        || (cfg.npeers && !cfg.data && !cfg.iterations && !cfg.duration_ns)
        || (cfg.data && cfg.qps != 1)) {
        fprintf(stderr, ENGINE_NAME ": need local=, 1..%d paths, a 64..%d mtu, a size, a rate, "
                "prio 0..7, iterations or duration_ms (or data=1, with one QP a peer)\n", MAX_PATHS, PKT_MAX - 100);
        exit(2);
    }
}

static void setup(void)
{
    int big = 1 << 24, one = 1;
    for (int i = 0; i < cfg.planes; i++) {
        raw_fd[i] = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
        if (raw_fd[i] < 0)
            die("socket(IPPROTO_RAW)");
        setsockopt(raw_fd[i], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
        if (cfg.mark[i] && setsockopt(raw_fd[i], SOL_SOCKET, SO_MARK, &cfg.mark[i],
                                      sizeof(cfg.mark[i])) < 0)
            die("SO_MARK");
    }
    udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (udp_fd < 0)
        die("socket(UDP)");
    if (setsockopt(udp_fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
        setsockopt(udp_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    setsockopt(udp_fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    setsockopt(udp_fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(ROCE_PORT)};
    if (bind(udp_fd, (struct sockaddr *)&any, sizeof(any)) < 0)
        die("bind UDP 4791");
    for (int i = 0; i < cfg.planes; i++) {
        pause_fd[i] = -1;
        if (!cfg.iface[i][0])
            continue;
        cfg.ifindex[i] = (int)if_nametoindex(cfg.iface[i]);
        pause_fd[i] = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(0x8808));
        if (pause_fd[i] < 0 || packet_bind(pause_fd[i], (int)if_nametoindex(cfg.iface[i]), 0x8808) < 0)
            die(cfg.iface[i]);
    }
    for (int peer = 0; peer < cfg.npeers; peer++)
        for (int q = 0; q < cfg.qps; q++) {
            if (nconns == MAX_CONNS)
                break;
            struct conn *c = calloc(1, sizeof(*c));
            if (!c || !(c->acked = calloc(WINDOW / 8, 1)))
                die("calloc");
            c->qpn = (uint32_t)cfg.id << 12 | (uint32_t)nconns;
            c->peer = peer;
            c->npaths = cfg.metaroce ? cfg.paths : 1;
            c->rc = c->rt = (double)cfg.rate_bps;
            c->alpha = 1.0;
            for (int i = 0; i < c->npaths; i++) {
                struct path *p = &c->path[i];
                /* QP q on plane q, path i of a connection on plane i: every plane NIC in use */
                int k = cfg.metaroce ? i : q;
                p->plane = k % cfg.planes;
                p->peer_plane = k % cfg.peer_planes[peer];
                p->sport = sport_of(c->qpn, i);
                p->cwnd = 16;
                p->rto = (int64_t)cfg.rto_init_ns;
            }
            conns[nconns++] = c;
        }
}

static void json_bins(const uint64_t *bins)
{
    int last = MAX_BINS - 1;
    while (last > 0 && !bins[last])
        last--;
    printf("[");
    for (int i = 0; i <= last; i++)
        printf("%s%" PRIu64, i ? "," : "", bins[i]);
    printf("]");
}

static void report(void)
{
    char a[INET_ADDRSTRLEN];
    int64_t paused = 0;
    uint64_t frames = 0;
    for (int i = 0; i < cfg.planes; i++) {
        paused += pause_ns[i];
        frames += pause_frames[i];
    }
    printf("{\"id\": %d, \"transport\": \"%s\", \"start_ns\": %" PRIu64 ", \"bin_ns\": %" PRIu64
           ", \"pause_ns\": %" PRId64 ", \"pause_frames\": %" PRIu64 ", \"requesters\": [",
           cfg.id, cfg.metaroce ? "metaroce" : "roce", cfg.start_ns, cfg.bin_ns, paused, frames);
    for (int i = 0; i < nconns; i++) {
        struct conn *c = conns[i];
        inet_ntop(AF_INET, &cfg.peer[c->peer][0], a, sizeof(a));
        printf("%s{\"qpn\": %u, \"peer\": \"%s\", \"bytes\": %" PRIu64 ", \"messages\": %" PRIu64
               ", \"first_ns\": %" PRId64 ", \"done_ns\": %" PRId64 ", \"sent\": %" PRIu64
               ", \"retransmitted\": %" PRIu64 ", \"naks\": %" PRIu64 ", \"timeouts\": %" PRIu64
               ", \"cnps\": %" PRIu64 ", \"ecn_echoes\": %" PRIu64 ", \"error\": %s, "
               "\"rate_bps\": %.0f, \"min_rtt_ns\": %" PRId64 ", \"paths\": [",
               i ? ", " : "", c->qpn, a, c->bytes_done, c->msgs_done, c->first, c->done_at,
               c->sent, c->retx, c->naks, c->timeouts, c->cnps, c->ecn_echoes,
               c->error ? "true" : "false", cfg.metaroce ? c->hint_bps : c->rc, c->min_rtt);
        for (int k = 0; k < c->npaths; k++) {
            struct path *p = &c->path[k];
            printf("%s{\"plane\": %d, \"sport\": %u, \"sent\": %" PRIu64 ", \"retransmitted\": %"
                   PRIu64 ", \"timeouts\": %" PRIu64 ", \"ecn_echoes\": %" PRIu64 ", \"dead\": %s, "
                   "\"abandoned_ns\": %" PRId64 ", \"abandon_timeouts\": %d, \"srtt_ns\": %" PRId64
                   ", \"cwnd\": %.2f}", k ? ", " : "", p->plane, p->sport, p->sent, p->retx,
                   p->timeouts, p->ecn, p->dead ? "true" : "false", p->abandoned,
                   p->abandon_timeouts, p->srtt, p->cwnd);
        }
        printf("], \"timeline\": ");
        json_bins(c->bins);
        printf("}");
    }
    printf("], \"held\": ");
    json_bins(held);
    printf(", \"responders\": [");
    for (int i = 0; i < nrx; i++) {
        struct rx *r = rxs[i];
        inet_ntop(AF_INET, &r->src, a, sizeof(a));
        printf("%s{\"qpn\": %u, \"source\": \"%s\", \"packets\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"messages\": %" PRIu64 ", \"duplicates\": %" PRIu64 ", \"out_of_order\": %"
               PRIu64 ", \"ce\": %" PRIu64 ", \"cnps\": %" PRIu64 ", \"naks\": %" PRIu64
               ", \"first_ns\": %" PRId64 ", \"last_ns\": %" PRId64 ", \"timeline\": ",
               i ? ", " : "", r->qpn, a, r->packets, r->bytes, r->msgs, r->dup, r->ooo, r->ce,
               r->cnps, r->naks, r->first, r->last);
        json_bins(r->bins);
        printf("}");
    }
    printf("]}\n");
    fflush(stdout);
}

/* When something is due that no socket announces: a paced packet, a NIC's next slot or the
 * end of its pause, a path's or a QP's timeout, a probe, the start. Sockets wake it for the
 * rest (an ACK, a write, a PAUSE, the parent's data), so an engine waiting on its peers
 * sleeps instead of polling. */
#define IDLE_POLL_NS 20000000
static int64_t next_event(int64_t now)
{
    int64_t t = now + IDLE_POLL_NS;
#define SOONER(x) do { int64_t at_ = (x); if (at_ > now && at_ < t) t = at_; } while (0)
    if (now < (int64_t)cfg.start_ns)
        SOONER((int64_t)cfg.start_ns);
    for (int i = 0; i < cfg.planes; i++) {
        SOONER(nic_next[i]);
        SOONER(paused_until[i]);
    }
    for (int i = 0; i < nconns; i++) {
        struct conn *c = conns[i];
        if (c->done || c->error)
            continue;
        if (!cfg.data || c->nxt < c->posted)
            SOONER(c->next_send);
        if (!cfg.metaroce) {
            if (c->una_g < c->nxt)
                SOONER(c->last_progress + (int64_t)cfg.timeout_ns + 1);
            continue;
        }
        for (int k = 0; k < c->npaths; k++) {
            struct path *p = &c->path[k];
            if (p->dead)
                SOONER(p->next_probe);
            /* as the timer's own check found it this loop: ACKs since only delay it, and a
             * packet sent since is not the oldest */
            if (p->inflight && p->due)
                SOONER(p->due);
            else if (p->inflight)
                SOONER(now + p->rto);
        }
    }
#undef SOONER
    return t;
}

/* A timer does not count time the host held the engine. A NIC never stops; its emulation
 * does (a paused VM stops every engine of the lab at once), and an answer due meanwhile could
 * not come: timing out on waking would resend what is on its way. A timer the hold took time
 * from is later by the hold; one that fell due in it starts over from the wake, since the
 * peers that answer were held as long and need their turn. Send times stay: an RTT sample is
 * what the packet took, and a packet on the wire went on while only this engine was held. */
static int64_t deferred(int64_t anchor, int64_t timeout, int64_t woke, int64_t held_ns)
{
    int64_t due = anchor + timeout;
    if (due < woke - held_ns)
        return anchor;                  /* due before the hold: it fires now */
    return due <= woke ? woke : anchor + held_ns;
}

static void defer_timers(int64_t woke, int64_t held_ns)
{
    for (int i = 0; i < nconns; i++) {
        struct conn *c = conns[i];
        if (c->una_g < c->nxt)
            c->last_progress = deferred(c->last_progress, (int64_t)cfg.timeout_ns, woke,
                                        held_ns);
        for (int k = 0; k < c->npaths; k++) {
            struct path *p = &c->path[k];
            int64_t oldest = INT64_MAX;
            for (uint32_t psn = p->una; psn != p->nxt; psn++) {
                struct slot *s = &p->ring[psn % RING];
                if (s->state == SLOT_OUT && s->sent < oldest)
                    oldest = s->sent;
            }
            if (oldest == INT64_MAX)
                continue;               /* nothing out: its timer starts with its next send */
            int64_t anchor = oldest > p->last_timeout ? oldest : p->last_timeout;
            p->last_timeout = deferred(anchor, p->rto, woke, held_ns);
            if (p->due)
                p->due = p->last_timeout + p->rto + 1;
        }
    }
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
    parse(argc, argv);
    crc_init();
    setup();
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    prctl(PR_SET_TIMERSLACK, 1UL);
    if (!cfg.start_ns)
        cfg.start_ns = (uint64_t)now_ns();
    for (int i = 0; i < nconns; i++) {
        struct conn *c = conns[i];
        c->last_alpha = c->last_timer = c->last_progress = (int64_t)cfg.start_ns;
    }
    int64_t deadline = (int64_t)cfg.start_ns + (int64_t)cfg.deadline_ns;
    struct pollfd fds[2 + MAX_PLANES];
    int nfds = 0;
    fds[nfds++] = (struct pollfd){.fd = udp_fd, .events = POLLIN};
    for (int i = 0; i < cfg.planes; i++)
        if (pause_fd[i] >= 0)
            fds[nfds++] = (struct pollfd){.fd = pause_fd[i], .events = POLLIN};
    if (cfg.data) {
        input_open = 1;
        fcntl(DATA_IN, F_SETFL, fcntl(DATA_IN, F_GETFL) | O_NONBLOCK);
        fds[nfds++] = (struct pollfd){.fd = DATA_IN, .events = POLLIN};
    }
    printf("{\"ready\": true}\n");
    fflush(stdout);
    while (!stop) {
        int64_t now = now_ns();
        receive(now);
        if (pause_ready)
            pauses(now);
        if (cfg.data && input_open && data_ready)
            take_input();
        int busy = cfg.data && input_open;
        if (now >= (int64_t)cfg.start_ns)
            for (int i = 0; i < nconns; i++) {
                struct conn *c = conns[i];
                if (c->done || c->error)
                    continue;
                busy = 1;
                if (!cfg.metaroce)
                    dcqcn_timers(c, now);
                if (cfg.metaroce)
                    metaroce_send(c, now);
                else
                    roce_send(c, now);
                if (finished(c, now)) {
                    c->done = 1;
                    c->done_at = now;
                }
            }
        flush();
        if (now >= deadline)
            break;
        int64_t quiet = last_rx ? last_rx : (int64_t)cfg.start_ns;
        if (!busy && now >= (int64_t)cfg.start_ns && now - quiet > (int64_t)cfg.idle_ns)
            break;
        int64_t wake = next_event(now);
        struct timespec ts = {.tv_sec = (wake - now) / 1000000000, .tv_nsec = (wake - now) % 1000000000};
        if (cfg.data && !input_open)
            fds[nfds - 1].fd = -1;           /* its end: nothing more to wait for there */
        ppoll(fds, (nfds_t)nfds, &ts, NULL);
        int64_t woke = now_ns();
        if (wake < now + IDLE_POLL_NS && woke - wake > CATCH_UP_NS) {
            hold(wake + CATCH_UP_NS, woke);
            defer_timers(woke, woke - wake - CATCH_UP_NS);
        }
        pause_ready = data_ready = 0;
        for (int i = 1; i < nfds; i++) {
            int ready = (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
            if (cfg.data && i == nfds - 1)
                data_ready = ready;
            else
                pause_ready |= ready;
        }
    }
    report();
    return 0;
}
