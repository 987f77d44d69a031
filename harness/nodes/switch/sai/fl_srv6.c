/* fl-srv6: the SAI dataplane's SRv6 path where the kernel has no seg6/seg6local.
 *
 * The kernel still does every lookup; this process does what a seg6 or seg6local route would
 * do to the packet. It owns a TAP (no carrier without it). The SAI backend points routes at
 * it through next hops "via fe80::53:N dev TAP" whose neighbours are permanent, with MAC
 * 02:53:36:00:HH:LL (N = 0xHHLL), so the destination MAC of each frame the kernel sends into
 * the TAP says what to do with it, as an ASIC's next-hop index does:
 *   N = 0  a my-SID entry: looked up by the packet's IPv6 destination (End, End.X, End.DT6,
 *          End.DT4, End.DT46, End.DX6, End.DX4);
 *   N > 0  SID list N: H.Encaps, H.Encaps.Red or H.Insert with that list.
 * A packet whose next step is a FIB lookup (End, End.DT*, every encapsulation) is written back
 * into the TAP and the kernel forwards it; one that leaves by a given adjacency (End.X,
 * End.DX6, End.DX4) is sent from a packet socket on that port to its neighbour's MAC, which
 * this process follows in the kernel's neighbour table. Frames still pass the port's qdiscs
 * (no QDISC_BYPASS), so link impairments apply. Hop limits come out as the kernel's seg6 and
 * seg6local leave them: the kernel took one when it forwarded the packet into the TAP, and
 * the engine gives it back where the kernel would not have forwarded the packet at all
 * (End's packet is forwarded once more after the TAP; an encapsulated packet's inner one is
 * carried, not forwarded, and its outer one is forwarded once).
 *
 * Batches: one wake-up reads up to BURST frames from the TAP, and what leaves by an adjacency
 * goes out in one sendmmsg per burst. A TAP gives and takes one frame per read() and write(),
 * and reading its frames from a packet socket instead (one recvmmsg per batch) cost more per
 * frame than the reads it saved: the capture clones every frame and the TAP's own queue must
 * filter it too (bench/srv6.py: 167k against 206k frames per CPU second at the headend).
 * "batch 0" on the control socket sends each frame as it is made, the bench's baseline.
 *
 *   fl-srv6 run TAP CTL_SOCKET SOURCE      SOURCE: the outer source address of encapsulations
 *
 * The control socket (SOCK_SEQPACKET) takes, all or nothing:
 *   sid SID BEHAVIOR [NEXTHOP IFINDEX]     BEHAVIOR: End End.X End.DT6 End.DT4 End.DT46
 *                                          End.DX6 End.DX4
 *   nosid SID
 *   list N MODE SEG[,SEG...] [PORT]        MODE: encap encap.red inline; PORT: kept for the
 *                                          agent's warm start, which reads it back
 *   nolist N
 *   batch 0|1                              adjacency sends per burst (1, from the start) or not
 *   show                                   one line per SID and list with its counters
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_NAME "fl-srv6"
#include "fl_engine.h"

#define MAX_FRAME 65536
#define BURST 256   /* frames read per wake-up before the other sockets are looked at */
#define TX_BATCH 64
#define MAX_SIDS 4096
#define MAX_LISTS 4096
#define MAX_SEGS 16
#define MAX_NEIGH 4096
#define ETH_LEN 14
#define IP6_LEN 40
#define SRH_FIXED 8
#define NH_ROUTING 43
#define NH_IPV6 41
#define NH_IPV4 4
#define SRH_TYPE 4
#define OUTER_HOP_LIMIT 64
#define RESOLVE_EVERY_NS 10000000LL   /* an unresolved neighbour is asked for again this often */
#define PENDING 3   /* packets a SID holds while its neighbour resolves (Linux's unres_qlen) */
#define REPLY_MAX 65000
/* Room before a frame for an outer header and the largest SRH (an inline one: 17 entries). */
#define HEADROOM (IP6_LEN + SRH_FIXED + 16 * (MAX_SEGS + 1) + 64)

static const unsigned char MAC_PREFIX[4] = {0x02, 0x53, 0x36, 0x00};
static const unsigned char ENGINE_MAC[6] = {0x02, 0x53, 0x36, 0xff, 0xff, 0xff};

enum behavior { END, END_X, END_DT6, END_DT4, END_DT46, END_DX6, END_DX4, BEHAVIORS };
static const char *BEHAVIOR[BEHAVIORS] = {"End", "End.X", "End.DT6", "End.DT4", "End.DT46",
                                          "End.DX6", "End.DX4"};
/* The inner packets each decapsulation takes; the End.DT* hand theirs to the kernel's lookup. */
enum { TAKES_V4 = 1, TAKES_V6 = 2 };
static const int TAKES[BEHAVIORS] = {[END_DT6] = TAKES_V6, [END_DT4] = TAKES_V4,
                                     [END_DT46] = TAKES_V4 | TAKES_V6, [END_DX6] = TAKES_V6,
                                     [END_DX4] = TAKES_V4};
static const int LOOKS_UP[BEHAVIORS] = {[END_DT6] = 1, [END_DT4] = 1, [END_DT46] = 1};
enum mode { ENCAP, ENCAP_RED, INLINE, MODES };
static const char *MODE[MODES] = {"encap", "encap.red", "inline"};

/* Why a packet was not forwarded; each SID and list counts them apart. */
enum drop { NOT_SRV6, SEGMENTS_LEFT, WRONG_PAYLOAD, HOP_LIMIT, NO_NEIGHBOUR, TOO_BIG, SEND,
            DROPS };
static const char *DROP[DROPS] = {"not_srv6", "segments_left", "wrong_payload", "hop_limit",
                                  "no_neighbour", "too_big", "send"};

struct counters { uint64_t packets, bytes, drops[DROPS]; };

struct pending { unsigned char *frame; uint32_t len; uint16_t ethertype; };

struct sid {
    struct in6_addr addr;
    enum behavior behavior;
    int family;                 /* of the next hop (End.X, End.DX*), 0 without one */
    unsigned char nexthop[16];
    int oif;
    char port[IF_NAMESIZE];
    unsigned char port_mac[6];
    int64_t resolved_at;        /* last time the neighbour was asked for */
    struct pending pending[PENDING];
    int npending;
    struct counters c;
};

struct list {
    int used;
    enum mode mode;
    int port;                        /* the SAI next hop's port, kept for the agent only */
    int n;
    struct in6_addr segs[MAX_SEGS];  /* in path order: segs[0] is visited first */
    struct counters c;
};

struct neighbour { int family, ifindex; unsigned char addr[16], mac[6]; };

static struct sid sids[MAX_SIDS];    /* sorted by address */
static int nsids;
static struct list lists[MAX_LISTS];
static struct neighbour neigh[MAX_NEIGH];
static int nneigh;
static struct in6_addr source;
static unsigned char tap_mac[6];
static int tap_fd, wire_fd, netlink_fd, resolve6_fd, resolve4_fd;
static int batch = 1;
/* Frames to adjacencies, sent together once the batch they came in with is done. */
static struct {
    int n;
    struct sid *sid[TX_BATCH];
    uint32_t len[TX_BATCH];
    struct sockaddr_ll to[TX_BATCH];
    struct iovec iov[TX_BATCH];
    struct mmsghdr msgs[TX_BATCH];
} out;
static uint64_t other_frames;
static volatile sig_atomic_t stopping;

static void on_stop(int sig) { (void)sig; stopping = 1; }

/* -- tables ------------------------------------------------------------------------------ */

static int sid_cmp(const void *a, const void *b)
{
    return memcmp(&((const struct sid *)a)->addr, &((const struct sid *)b)->addr, 16);
}

static struct sid *sid_find(const struct in6_addr *addr)
{
    struct sid key = {.addr = *addr};
    return bsearch(&key, sids, nsids, sizeof *sids, sid_cmp);
}

static struct neighbour *neigh_find(int family, int ifindex, const unsigned char *addr)
{
    int len = family == AF_INET ? 4 : 16;
    for (int i = 0; i < nneigh; i++)
        if (neigh[i].family == family && neigh[i].ifindex == ifindex &&
            !memcmp(neigh[i].addr, addr, len))
            return &neigh[i];
    return NULL;
}

static void flush_pending(const struct neighbour *n);

/* One neighbour message (a dump's or a change's): usable entries kept, the rest forgotten. */
static void neigh_update(struct nlmsghdr *h)
{
    struct ndmsg *nd = NLMSG_DATA(h);
    unsigned char *dst = NULL, *mac = NULL;
    int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof *nd);
    for (struct rtattr *a = (struct rtattr *)((char *)nd + NLMSG_ALIGN(sizeof *nd));
         RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == NDA_DST)
            dst = RTA_DATA(a);
        else if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6)
            mac = RTA_DATA(a);
    }
    if (!dst || (nd->ndm_family != AF_INET && nd->ndm_family != AF_INET6))
        return;
    struct neighbour *n = neigh_find(nd->ndm_family, nd->ndm_ifindex, dst);
    int usable = h->nlmsg_type == RTM_NEWNEIGH && mac &&
                 (nd->ndm_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE |
                                   NUD_PERMANENT | NUD_NOARP));
    if (usable && !n && nneigh < MAX_NEIGH) {
        n = &neigh[nneigh++];
        n->family = nd->ndm_family;
        n->ifindex = nd->ndm_ifindex;
        memcpy(n->addr, dst, nd->ndm_family == AF_INET ? 4 : 16);
    }
    if (usable && n) {
        memcpy(n->mac, mac, 6);
        flush_pending(n);
    } else if (!usable && n)
        *n = neigh[--nneigh];
}

static void neigh_dump(void)
{
    struct { struct nlmsghdr h; struct ndmsg nd; } req = {
        .h = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_GETNEIGH,
              .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .nd = {.ndm_family = AF_UNSPEC}};
    nneigh = 0;
    if (send(netlink_fd, &req, sizeof req, 0) < 0)
        die("neighbour dump");
}

static void netlink_read(void)
{
    static char buf[1 << 16];
    ssize_t got;
    while ((got = recv(netlink_fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
        int len = (int)got;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
             h = NLMSG_NEXT(h, len))
            if (h->nlmsg_type == RTM_NEWNEIGH || h->nlmsg_type == RTM_DELNEIGH)
                neigh_update(h);
    }
    if (got < 0 && errno == ENOBUFS)   /* changes were lost: read the whole table again */
        neigh_dump();
}

static void open_netlink(void)
{
    netlink_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    struct sockaddr_nl local = {.nl_family = AF_NETLINK, .nl_groups = RTMGRP_NEIGH};
    if (netlink_fd < 0 || bind(netlink_fd, (struct sockaddr *)&local, sizeof local) < 0)
        die("netlink");
    neigh_dump();
}

/* A neighbour the kernel has not resolved: a datagram to it makes the kernel ask. Not while
 * the port has no carrier: a solicitation into a dead link would leave the entry waiting a
 * whole ND retransmission (1 s) after the link comes back. */
static void resolve(struct sid *s)
{
    int64_t now = now_ns();
    if (now - s->resolved_at < RESOLVE_EVERY_NS)
        return;
    struct ifreq q = {0};
    snprintf(q.ifr_name, IFNAMSIZ, "%s", s->port);
    if (ioctl(resolve4_fd, SIOCGIFFLAGS, &q) < 0 || !(q.ifr_flags & IFF_RUNNING))
        return;
    s->resolved_at = now;
    if (s->family == AF_INET6) {
        struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons(9),
                                  .sin6_scope_id = (uint32_t)s->oif};
        memcpy(&to.sin6_addr, s->nexthop, 16);
        sendto(resolve6_fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to);
    } else {
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)};
        memcpy(&to.sin_addr, s->nexthop, 4);
        sendto(resolve4_fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to);
    }
}

/* -- packets ----------------------------------------------------------------------------- */

static void count(struct counters *c, uint32_t len) { c->packets++; c->bytes += len; }

/* Back into the TAP for the kernel to forward, addressed to the TAP. `ip` points just past
 * the room for an Ethernet header. */
static int to_kernel(unsigned char *ip, uint32_t len, uint16_t ethertype, struct counters *c)
{
    unsigned char *frame = ip - ETH_LEN;
    memcpy(frame, tap_mac, 6);
    memcpy(frame + 6, ENGINE_MAC, 6);
    frame[12] = ethertype >> 8;
    frame[13] = ethertype & 0xff;
    if (write(tap_fd, frame, len + ETH_LEN) < 0) {
        c->drops[SEND]++;
        return -1;
    }
    count(c, len);
    return 0;
}

static uint16_t fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

static void count_send(int i, int err, void *ctx)
{
    (void)ctx;
    if (err)
        out.sid[i]->c.drops[err == EMSGSIZE ? TOO_BIG : SEND]++;
    else
        count(&out.sid[i]->c, out.len[i]);
}

static void out_flush(void)
{
    send_each(wire_fd, out.msgs, out.n, count_send, NULL);
    out.n = 0;
}

/* `ip` stays where it is until out_flush(), which the caller runs before reusing it. */
static void send_to(struct sid *s, const struct neighbour *n, unsigned char *ip, uint32_t len,
                    uint16_t ethertype)
{
    unsigned char *frame = ip - ETH_LEN;
    memcpy(frame, n->mac, 6);
    memcpy(frame + 6, s->port_mac, 6);
    frame[12] = ethertype >> 8;
    frame[13] = ethertype & 0xff;
    int i = out.n++;
    out.sid[i] = s;
    out.len[i] = len;
    out.to[i] = (struct sockaddr_ll){.sll_family = AF_PACKET, .sll_ifindex = s->oif,
                                     .sll_halen = 6, .sll_protocol = htons(ethertype)};
    memcpy(out.to[i].sll_addr, n->mac, 6);
    out.iov[i] = (struct iovec){.iov_base = frame, .iov_len = len + ETH_LEN};
    out.msgs[i].msg_hdr = (struct msghdr){.msg_name = &out.to[i], .msg_namelen = sizeof out.to[i],
                                          .msg_iov = &out.iov[i], .msg_iovlen = 1};
    if (out.n == TX_BATCH || !batch)
        out_flush();
}

/* Held until the neighbour resolves, as the kernel holds a few; the oldest goes first. */
static void hold(struct sid *s, const unsigned char *ip, uint32_t len, uint16_t ethertype)
{
    if (s->npending == PENDING) {
        s->c.drops[NO_NEIGHBOUR]++;
        free(s->pending[0].frame);
        memmove(s->pending, s->pending + 1, (PENDING - 1) * sizeof *s->pending);
        s->npending--;
    }
    struct pending *p = &s->pending[s->npending];
    p->frame = malloc(ETH_LEN + len);
    if (!p->frame) {
        s->c.drops[SEND]++;
        return;
    }
    memcpy(p->frame + ETH_LEN, ip, len);
    p->len = len;
    p->ethertype = ethertype;
    s->npending++;
}

static void drop_pending(struct sid *s)
{
    for (int k = 0; k < s->npending; k++)
        free(s->pending[k].frame);
    s->npending = 0;
}

static void flush_pending(const struct neighbour *n)
{
    int len = n->family == AF_INET ? 4 : 16;
    for (int i = 0; i < nsids; i++) {
        struct sid *s = &sids[i];
        if (!s->npending || s->family != n->family || s->oif != n->ifindex ||
            memcmp(s->nexthop, n->addr, len))
            continue;
        for (int k = 0; k < s->npending; k++)
            send_to(s, n, s->pending[k].frame + ETH_LEN, s->pending[k].len,
                    s->pending[k].ethertype);
        out_flush();
        drop_pending(s);
    }
}

/* An IPv4 header's TTL one up or down, its checksum following (RFC 1624: the TTL is the high
 * byte of its 16-bit word, so the word moves by 0x0100). */
static void step_ttl(unsigned char *ip, int by)
{
    ip[8] = (unsigned char)(ip[8] + by);
    uint16_t check = (uint16_t)(ip[10] << 8 | ip[11]);
    check = (uint16_t)~fold((uint32_t)(uint16_t)~check + (by > 0 ? 0x0100 : 0xfeff));
    ip[10] = check >> 8;
    ip[11] = check & 0xff;
}

/* A decapsulated packet is forwarded, so it loses a hop (or a TTL) here. */
static int forward_inner(struct sid *s, unsigned char *ip, uint16_t ethertype)
{
    unsigned char *hops = ethertype == ETHERTYPE_IPV6 ? ip + 7 : ip + 8;
    if (*hops <= 1) {
        s->c.drops[HOP_LIMIT]++;
        return -1;
    }
    if (ethertype == ETHERTYPE_IP)
        step_ttl(ip, -1);
    else
        --*hops;
    return 0;
}

/* Out of the SID's port to its neighbour (the kernel already took the outer header's hop
 * when it forwarded the packet into the TAP). */
static void to_adjacency(struct sid *s, unsigned char *ip, uint32_t len, uint16_t ethertype)
{
    struct neighbour *n = neigh_find(s->family, s->oif, s->nexthop);
    if (n) {
        send_to(s, n, ip, len, ethertype);
        return;
    }
    hold(s, ip, len, ethertype);
    resolve(s);
}

/* The packet's SRH, if its first extension header is one. */
static unsigned char *srh_of(unsigned char *ip, uint32_t len)
{
    if (ip[6] != NH_ROUTING || len < IP6_LEN + SRH_FIXED)
        return NULL;
    unsigned char *srh = ip + IP6_LEN;
    uint32_t srh_len = SRH_FIXED + 8u * srh[1];
    if (srh[2] != SRH_TYPE || len < IP6_LEN + srh_len || 16u * (srh[4] + 1u) > srh_len - 8)
        return NULL;
    return srh;
}

/* End and End.X: the next segment becomes the destination. */
static void endpoint(struct sid *s, unsigned char *ip, uint32_t len)
{
    unsigned char *srh = srh_of(ip, len);
    if (!srh) {
        s->c.drops[NOT_SRV6]++;
        return;
    }
    if (srh[3] == 0 || srh[3] > srh[4] + 1) {
        s->c.drops[SEGMENTS_LEFT]++;
        return;
    }
    srh[3]--;
    memcpy(ip + 24, srh + SRH_FIXED + 16 * srh[3], 16);
    if (s->behavior == END_X) {
        to_adjacency(s, ip, len, ETHERTYPE_IPV6);
    } else {
        ip[7]++;   /* the forward after the TAP is the one this router makes */
        to_kernel(ip, len, ETHERTYPE_IPV6, &s->c);
    }
}

/* End.DT*, End.DX6, End.DX4: the path ends here; the inner packet goes on alone, looked up
 * by the kernel (End.DT*: the kernel's table is the switch's one VRF) or to the adjacency. */
static void decapsulate(struct sid *s, unsigned char *ip, uint32_t len)
{
    uint32_t offset = IP6_LEN;
    int inner = ip[6];
    unsigned char *srh = srh_of(ip, len);
    if (srh) {
        if (srh[3] != 0) {
            s->c.drops[SEGMENTS_LEFT]++;
            return;
        }
        inner = srh[0];
        offset += SRH_FIXED + 8u * srh[1];
    }
    int family = inner == NH_IPV4 ? TAKES_V4 : inner == NH_IPV6 ? TAKES_V6 : 0;
    if (!(TAKES[s->behavior] & family) || len <= offset) {
        s->c.drops[WRONG_PAYLOAD]++;
        return;
    }
    uint16_t ethertype = family == TAKES_V4 ? ETHERTYPE_IP : ETHERTYPE_IPV6;
    if (LOOKS_UP[s->behavior]) {
        to_kernel(ip + offset, len - offset, ethertype, &s->c);   /* the kernel forwards it */
    } else if (forward_inner(s, ip + offset, ethertype) == 0) {
        to_adjacency(s, ip + offset, len - offset, ethertype);
    }
}

static void my_sid(unsigned char *ip, uint32_t len)
{
    struct sid *s = len >= IP6_LEN && (ip[0] >> 4) == 6 ?
                    sid_find((struct in6_addr *)(ip + 24)) : NULL;
    if (!s) {
        other_frames++;
        return;
    }
    if (s->behavior == END || s->behavior == END_X)
        endpoint(s, ip, len);
    else
        decapsulate(s, ip, len);
}

static uint32_t fnv(uint32_t h, const unsigned char *bytes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ bytes[i]) * 16777619u;
    return h;
}

/* A flow label from the inner packet's addresses and ports, so ECMP on the way spreads flows
 * the way it would spread the inner packets. */
static uint32_t flow_label(const unsigned char *ip, uint32_t len, int v4)
{
    uint32_t header = v4 ? 4u * (ip[0] & 0xf) : IP6_LEN;
    int proto = v4 ? ip[9] : ip[6];
    uint32_t h = fnv(2166136261u, ip + (v4 ? 12 : 8), v4 ? 8 : 32);
    if ((proto == 6 || proto == 17) && len >= header + 4)
        h = fnv(h, ip + header, 4);
    return (h ^ h >> 20) & 0xfffff;
}

/* H.Encaps, H.Encaps.Red, H.Insert with list `l`. `ip` has room before it for the headers. */
static void head_end(struct list *l, unsigned char *ip, uint32_t len, uint16_t ethertype)
{
    int v4 = ethertype == ETHERTYPE_IP;
    if (len < (v4 ? 20u : IP6_LEN) || (ethertype != ETHERTYPE_IP && ethertype != ETHERTYPE_IPV6)
        || (l->mode == INLINE && v4)) {
        l->c.drops[WRONG_PAYLOAD]++;
        return;
    }
    if (l->mode == INLINE) {
        /* The SRH goes after the packet's own header; its destination becomes the last
         * segment, Segment List[0]. */
        int entries = l->n + 1;
        uint32_t srh_len = SRH_FIXED + 16u * entries;
        unsigned char *out = ip - srh_len;
        memmove(out, ip, IP6_LEN);
        unsigned char *srh = out + IP6_LEN;
        srh[0] = out[6];
        srh[1] = (unsigned char)((srh_len - 8) / 8);
        srh[2] = SRH_TYPE;
        srh[3] = (unsigned char)l->n;
        srh[4] = (unsigned char)(entries - 1);
        srh[5] = srh[6] = srh[7] = 0;
        memcpy(srh + SRH_FIXED, out + 24, 16);
        for (int i = 0; i < l->n; i++)
            memcpy(srh + SRH_FIXED + 16 * (entries - 1 - i), &l->segs[i], 16);
        out[6] = NH_ROUTING;
        uint32_t payload = (uint32_t)(out[4] << 8 | out[5]) + srh_len;
        out[4] = payload >> 8;
        out[5] = payload & 0xff;
        memcpy(out + 24, &l->segs[0], 16);
        out[7]++;   /* one forward, after the TAP, as for End */
        to_kernel(out, len + srh_len, ETHERTYPE_IPV6, &l->c);
        return;
    }
    /* A reduced SRH leaves out the first segment (the destination says it), and with one
     * segment there is no SRH at all. */
    int entries = l->mode == ENCAP_RED ? l->n - 1 : l->n;
    uint32_t srh_len = entries ? SRH_FIXED + 16u * entries : 0;
    unsigned char *out = ip - IP6_LEN - srh_len;
    uint32_t payload = srh_len + len;
    if (payload > 0xffff) {
        l->c.drops[TOO_BIG]++;
        return;
    }
    /* Encapsulated, the inner packet is carried, not forwarded: the hop (or TTL) the kernel
     * took on the way into the TAP goes back. The outer header takes Linux's seg6 values:
     * the inner's traffic class, and its hop limit (64 over IPv4), which the forward after
     * the TAP takes one from. */
    if (v4)
        step_ttl(ip, 1);
    else
        ip[7]++;
    uint32_t label = flow_label(ip, len, v4);
    unsigned tclass = v4 ? ip[1] : (unsigned)((ip[0] & 0xf) << 4 | ip[1] >> 4);
    out[0] = (unsigned char)(0x60 | tclass >> 4);
    out[1] = (unsigned char)((tclass & 0xf) << 4 | (label >> 16 & 0xf));
    out[2] = (unsigned char)(label >> 8);
    out[3] = (unsigned char)label;
    out[4] = payload >> 8;
    out[5] = payload & 0xff;
    out[6] = entries ? NH_ROUTING : (v4 ? NH_IPV4 : NH_IPV6);
    out[7] = v4 ? OUTER_HOP_LIMIT : ip[7];
    memcpy(out + 8, &source, 16);
    memcpy(out + 24, &l->segs[0], 16);
    if (entries) {
        unsigned char *srh = out + IP6_LEN;
        srh[0] = v4 ? NH_IPV4 : NH_IPV6;
        srh[1] = (unsigned char)((srh_len - 8) / 8);
        srh[2] = SRH_TYPE;
        srh[3] = (unsigned char)(l->n - 1);
        srh[4] = (unsigned char)(entries - 1);
        srh[5] = srh[6] = srh[7] = 0;
        /* Segment List[0] is the last segment; a full list holds the first at [n-1]. */
        for (int i = l->n - entries; i < l->n; i++)
            memcpy(srh + SRH_FIXED + 16 * (l->n - 1 - i), &l->segs[i], 16);
    }
    to_kernel(out, IP6_LEN + payload, ETHERTYPE_IPV6, &l->c);
}

static void take_frame(unsigned char *frame, uint32_t len)
{
    if (len < ETH_LEN || memcmp(frame, MAC_PREFIX, 4)) {
        other_frames++;
        return;
    }
    unsigned index = (unsigned)frame[4] << 8 | frame[5];
    uint16_t ethertype = (uint16_t)(frame[12] << 8 | frame[13]);
    if (index == 0) {
        if (ethertype == ETHERTYPE_IPV6)
            my_sid(frame + ETH_LEN, len - ETH_LEN);
        else
            other_frames++;
    } else if (index < MAX_LISTS && lists[index].used) {
        head_end(&lists[index], frame + ETH_LEN, len - ETH_LEN, ethertype);
    } else {
        other_frames++;
    }
}

/* -- control ----------------------------------------------------------------------------- */

static int parse_sid(char **words, int n, char *err, size_t errlen)
{
    struct sid s = {0};
    if (n != 3 && n != 5)
        return snprintf(err, errlen, "sid SID BEHAVIOR [NEXTHOP IFINDEX]"), -1;
    if (inet_pton(AF_INET6, words[1], &s.addr) != 1)
        return snprintf(err, errlen, "%s is not an IPv6 address", words[1]), -1;
    int b = 0;
    while (b < BEHAVIORS && strcmp(words[2], BEHAVIOR[b]))
        b++;
    if (b == BEHAVIORS)
        return snprintf(err, errlen, "%s is not a behavior", words[2]), -1;
    s.behavior = (enum behavior)b;
    int adjacency = b == END_X || b == END_DX6 || b == END_DX4;
    if (adjacency != (n == 5))
        return snprintf(err, errlen, "%s %s a next hop", words[2],
                        adjacency ? "needs" : "takes no"), -1;
    if (adjacency) {
        s.family = b == END_DX4 ? AF_INET : AF_INET6;
        s.oif = atoi(words[4]);
        char name[IF_NAMESIZE];
        if (inet_pton(s.family, words[3], s.nexthop) != 1)
            return snprintf(err, errlen, "%s is not a next hop for %s", words[3], words[2]), -1;
        if (s.oif <= 0 || !if_indextoname((unsigned)s.oif, name))
            return snprintf(err, errlen, "no interface %s", words[4]), -1;
        struct ifreq q = {0};
        snprintf(q.ifr_name, IFNAMSIZ, "%s", name);
        snprintf(s.port, sizeof s.port, "%s", name);
        if (ioctl(resolve4_fd, SIOCGIFHWADDR, &q) < 0)
            return snprintf(err, errlen, "%s: %s", name, strerror(errno)), -1;
        memcpy(s.port_mac, q.ifr_hwaddr.sa_data, 6);
    }
    struct sid *old = sid_find(&s.addr);
    if (old) {
        s.c = old->c;   /* a changed SID keeps counting */
        drop_pending(old);
        *old = s;
        return 0;
    }
    if (nsids == MAX_SIDS)
        return snprintf(err, errlen, "table full (%d SIDs)", MAX_SIDS), -1;
    sids[nsids++] = s;
    qsort(sids, nsids, sizeof *sids, sid_cmp);
    return 0;
}

static int parse_list(char **words, int n, char *err, size_t errlen)
{
    if (n != 4 && n != 5)
        return snprintf(err, errlen, "list N MODE SEG[,SEG...] [PORT]"), -1;
    int index = atoi(words[1]);
    if (index <= 0 || index >= MAX_LISTS)
        return snprintf(err, errlen, "list index %s is not in 1..%d", words[1], MAX_LISTS - 1), -1;
    struct list l = {.used = 1, .port = n == 5 ? atoi(words[4]) : 0};
    int m = 0;
    while (m < MODES && strcmp(words[2], MODE[m]))
        m++;
    if (m == MODES)
        return snprintf(err, errlen, "%s is not a mode", words[2]), -1;
    l.mode = (enum mode)m;
    for (char *save = NULL, *seg = strtok_r(words[3], ",", &save); seg;
         seg = strtok_r(NULL, ",", &save)) {
        if (l.n == MAX_SEGS)
            return snprintf(err, errlen, "more than %d segments", MAX_SEGS), -1;
        if (inet_pton(AF_INET6, seg, &l.segs[l.n++]) != 1)
            return snprintf(err, errlen, "%s is not an IPv6 address", seg), -1;
    }
    if (l.n == 0)
        return snprintf(err, errlen, "no segments"), -1;
    if (lists[index].used)
        l.c = lists[index].c;
    lists[index] = l;
    return 0;
}

static void show_counters(FILE *f, const struct counters *c)
{
    fprintf(f, " packets=%" PRIu64 " bytes=%" PRIu64, c->packets, c->bytes);
    for (int d = 0; d < DROPS; d++)
        if (c->drops[d])
            fprintf(f, " %s=%" PRIu64, DROP[d], c->drops[d]);
    fputc('\n', f);
}

static void show(char *out, size_t size)
{
    FILE *f = fmemopen(out, size, "w");
    char a[INET6_ADDRSTRLEN];
    for (int i = 0; i < nsids; i++) {
        struct sid *s = &sids[i];
        fprintf(f, "sid %s %s", inet_ntop(AF_INET6, &s->addr, a, sizeof a), BEHAVIOR[s->behavior]);
        if (s->family)
            fprintf(f, " nexthop=%s oif=%d", inet_ntop(s->family, s->nexthop, a, sizeof a),
                    s->oif);
        show_counters(f, &s->c);
    }
    for (int i = 1; i < MAX_LISTS; i++)
        if (lists[i].used) {
            fprintf(f, "list %d %s port=%d segs=", i, MODE[lists[i].mode], lists[i].port);
            for (int k = 0; k < lists[i].n; k++)
                fprintf(f, "%s%s", k ? "," : "", inet_ntop(AF_INET6, &lists[i].segs[k], a,
                                                           sizeof a));
            show_counters(f, &lists[i].c);
        }
    fprintf(f, "other frames=%" PRIu64 "\n", other_frames);
    fclose(f);
}

static void answer(int conn)
{
    char request[4096], reply[REPLY_MAX] = "ok";
    ssize_t got = recv(conn, request, sizeof request - 1, 0);
    if (got <= 0)
        return;
    request[got] = 0;
    char *words[8];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(request, " \n", &save); w && n < 8;
         w = strtok_r(NULL, " \n", &save))
        words[n++] = w;
    char err[256];
    int bad = 0;
    if (n == 0) {
        bad = snprintf(err, sizeof err, "empty request");
    } else if (!strcmp(words[0], "sid")) {
        bad = parse_sid(words, n, err, sizeof err) < 0;
    } else if (!strcmp(words[0], "list")) {
        bad = parse_list(words, n, err, sizeof err) < 0;
    } else if (!strcmp(words[0], "nosid") && n == 2) {
        struct in6_addr addr;
        struct sid *s = inet_pton(AF_INET6, words[1], &addr) == 1 ? sid_find(&addr) : NULL;
        if (s) {
            drop_pending(s);
            *s = sids[--nsids];
            qsort(sids, nsids, sizeof *sids, sid_cmp);
        }
    } else if (!strcmp(words[0], "nolist") && n == 2) {
        int index = atoi(words[1]);
        if (index > 0 && index < MAX_LISTS)
            memset(&lists[index], 0, sizeof lists[index]);
    } else if (!strcmp(words[0], "batch") && n == 2 && strlen(words[1]) == 1
               && (words[1][0] == '0' || words[1][0] == '1')) {
        batch = words[1][0] == '1';
    } else if (!strcmp(words[0], "show")) {
        show(reply, sizeof reply);
    } else {
        bad = snprintf(err, sizeof err, "unknown request %s", words[0]);
    }
    if (bad)
        snprintf(reply, sizeof reply, "error: %s", err);
    send(conn, reply, strlen(reply), MSG_NOSIGNAL);
}

/* -- setup ------------------------------------------------------------------------------- */

static int open_tap(const char *name)
{
    int fd = tap_create(name);
    struct ifreq q = {0};
    snprintf(q.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(resolve4_fd, SIOCGIFHWADDR, &q) < 0)
        die("SIOCGIFHWADDR");
    memcpy(tap_mac, q.ifr_hwaddr.sa_data, 6);
    q.ifr_mtu = MAX_FRAME - 256;   /* the packets grow here; the ports' MTU still applies */
    if (ioctl(resolve4_fd, SIOCSIFMTU, &q) < 0)
        die("SIOCSIFMTU");
    q.ifr_qlen = 10000;
    if (ioctl(resolve4_fd, SIOCSIFTXQLEN, &q) < 0)
        die("SIOCSIFTXQLEN");
    /* Routes over it need IPv6 on, but nothing of its own: no multicast (no MLD reports);
     * the agent gives it no link-local address either (addrgenmode none, over netlink: a
     * container's /proc/sys is read-only) before it brings it up. */
    if (ioctl(resolve4_fd, SIOCGIFFLAGS, &q) < 0)
        die("SIOCGIFFLAGS");
    q.ifr_flags &= ~IFF_MULTICAST;
    if (ioctl(resolve4_fd, SIOCSIFFLAGS, &q) < 0)
        die("SIOCSIFFLAGS");
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 5 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: fl-srv6 run TAP CTL_SOCKET SOURCE\n");
        return 2;
    }
    if (inet_pton(AF_INET6, argv[4], &source) != 1) {
        fprintf(stderr, "fl-srv6: %s is not an IPv6 source address\n", argv[4]);
        return 2;
    }
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    resolve4_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    resolve6_fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    wire_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (resolve4_fd < 0 || resolve6_fd < 0 || wire_fd < 0)
        die("socket");
    tap_fd = open_tap(argv[2]);
    open_netlink();
    int control = control_listen(argv[3]);   /* last: ready once it answers */
    fprintf(stderr, "fl-srv6: serving %s, control %s, source %s\n", argv[2], argv[3], argv[4]);
    struct pollfd fds[3] = {{.fd = tap_fd, .events = POLLIN}, {.fd = netlink_fd, .events = POLLIN},
                            {.fd = control, .events = POLLIN}};
    /* A frame stays in its buffer until the sends of its burst are flushed. */
    static unsigned char bufs[TX_BATCH][HEADROOM + MAX_FRAME];
    while (!stopping) {
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (fds[1].revents)
            netlink_read();
        if (fds[2].revents) {
            int conn = accept4(control, NULL, NULL, SOCK_CLOEXEC);
            if (conn >= 0) {
                answer(conn);
                close(conn);
            }
        }
        for (int burst = 0; fds[0].revents && burst < BURST; burst++) {
            unsigned char *frame = bufs[burst % TX_BATCH] + HEADROOM;
            ssize_t got = read(tap_fd, frame, MAX_FRAME);
            if (got < 0)
                break;
            take_frame(frame, (uint32_t)got);
            if (burst % TX_BATCH == TX_BATCH - 1)
                out_flush();
        }
        out_flush();
    }
    unlink(argv[3]);
    return 0;
}
