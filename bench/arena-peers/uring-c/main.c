/*
 * uring-c: the lab arena's io_uring HTTP/1.1 engine, of HttpArena's libreactorng / ringzero kind,
 * for the baseline, pipelined and limited-conn profiles (see README.md).
 *
 * Written here on Debian bookworm's liburing 2.3, from the settings of HttpArena's
 * frameworks/libreactorng and frameworks/ringzero entries (no code of theirs):
 * - one thread per worker (default: the CPUs in sched_getaffinity, as libreactorng), each with
 *   its own io_uring (SINGLE_ISSUER | DEFER_TASKRUN, as ringzero; older kernels fall back) and
 *   its own listener (SO_REUSEADDR, SO_REUSEPORT, TCP_NODELAY, backlog 4096, as libreactorng);
 * - a multishot accept per worker; per connection one recv into a 16 KiB input buffer (as
 *   libreactorng's stream) and a 16 KiB output slab (as ringzero's write slab): every request
 *   whole in a read is answered into the slab and the batch goes out in one send, the next recv
 *   is armed once it is sent (pipelined requests: one send per read);
 * - "Server: *" and a Date refreshed once a second by a ring timeout (libreactorng's head).
 *
 * Routes: GET|HEAD /pipeline -> "ok"; GET|HEAD|POST /baseline11?a=&b= -> the sum of the query's
 * integer values, plus the body's integer for POST (Content-Length or chunked); other methods on
 * those paths 405; any other path 404. Malformed requests 400 (or 413/414/431/501/505) and close.
 *
 * Command line: --h1 HOST:PORT [--workers N], and the arena peers' other common flags
 * (--tls --cert --key --h2c --static --dataset --database-url), accepted and ignored.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- settings --------------------------------------------------------------------------- */

enum {
    RING_ENTRIES = 4096,   /* libreactorng's REACTOR_RING_SIZE */
    LISTEN_BACKLOG = 4096, /* libreactorng's listen(…, 4096); the kernel caps it at somaxconn */
    IN_CAP = 16384,        /* per-connection input: libreactorng's STREAM_BLOCK_SIZE */
    OUT_CAP = 16384,       /* per-connection output slab: ringzero's DEFAULT_WRITE_SLAB_SIZE */
    HEAD_MAX = 8192,       /* a request head (request line + fields) over this: 414/431, close */
    FIELDS_MAX = 100,      /* header fields per request, over this: 431 */
    RESP_MAX = 512,        /* room one answer needs in the slab; less left: send, then go on */
    DRAIN_MAX = 65536,     /* bytes read and dropped after our close's FIN before the close */
    FREE_MAX = 1024,       /* connection structs kept for reuse per worker */
};

/* ---- small helpers ---------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3), noreturn)) static void die(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("uring-c: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    exit(code);
}

static int is_tchar(unsigned char ch)
{
    /* RFC 9110 token characters */
    static const char extra[] = "!#$%&'*+-.^_`|~";
    return (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') ||
           (ch != 0 && memchr(extra, ch, sizeof(extra) - 1) != NULL);
}

/* `s` (length n) equals the lower-case literal `lit` ignoring ASCII case */
static int eq_nocase(const char *s, size_t n, const char *lit)
{
    size_t len = strlen(lit);
    if (n != len)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] | 0x20 : s[i]) != lit[i])
            return 0;
    return 1;
}

/* An optionally negative decimal integer of 1..18 digits making up all of [p, end). */
static int parse_int(const char *p, const char *end, int64_t *out)
{
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p == end || end - p > 18)
        return 0;
    int64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (*p - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

static char *put_u64(char *o, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *o++ = tmp[--n];
    return o;
}

static char *put_i64(char *o, int64_t v)
{
    if (v < 0) {
        *o++ = '-';
        return put_u64(o, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(o, (uint64_t)v);
}

#define PUT(o, lit) (memcpy((o), (lit), sizeof(lit) - 1), (o) += sizeof(lit) - 1)

/* ---- connections and workers ------------------------------------------------------------ */

enum { OP_ACCEPT = 1, OP_TICK, OP_RECV, OP_SEND, OP_DRAIN, OP_IGNORE };

typedef struct conn {
    int fd;
    uint32_t in_len;       /* bytes in `in` not yet answered (from in[0]) */
    uint32_t out_len;      /* bytes written into `out` */
    uint32_t out_sent;     /* of which sent */
    uint32_t drained;      /* bytes dropped while lingering */
    uint8_t closing;       /* answer what is in `out`, then close */
    uint8_t continue_sent; /* "100 Continue" sent for the request being read */
    struct conn *next_free;
    char in[IN_CAP];
    char out[OUT_CAP];
} conn_t;

typedef struct worker {
    int listen_fd;
    int init_err; /* errno of a failed ring setup, reported by main */
    struct io_uring ring;
    int accept_armed;
    struct __kernel_timespec tick_ts, linger_ts;
    conn_t *free_list;
    int free_count;
    /* "HTTP/1.1 200 OK … Content-Length: " and the whole /pipeline answer, rebuilt each second */
    char date[32];
    char h200[160];
    size_t h200_len;
    char pipeline[192];
    size_t pipeline_len;
    char scratch[IN_CAP]; /* a chunked body, decoded */
} worker_t;

static pthread_barrier_t started;

static void refresh_date(worker_t *w)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    snprintf(w->date, sizeof(w->date), "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
             months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    w->h200_len = (size_t)snprintf(w->h200, sizeof(w->h200),
                                   "HTTP/1.1 200 OK\r\nServer: *\r\nDate: %s\r\nContent-Type: text/plain\r\n"
                                   "Content-Length: ",
                                   w->date);
    memcpy(w->pipeline, w->h200, w->h200_len);
    memcpy(w->pipeline + w->h200_len, "2\r\n\r\nok", 7);
    w->pipeline_len = w->h200_len + 7;
    /* the next tick just after the next second starts */
    long long ns = 1000000000LL - now.tv_nsec + 1000000;
    w->tick_ts.tv_sec = ns / 1000000000LL;
    w->tick_ts.tv_nsec = ns % 1000000000LL;
}

static struct io_uring_sqe *get_sqe(worker_t *w)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
    if (sqe == NULL) {
        io_uring_submit(&w->ring);
        sqe = io_uring_get_sqe(&w->ring);
        if (sqe == NULL)
            die(1, "%s", "the submission queue stays full");
    }
    return sqe;
}

static inline uint64_t tag(conn_t *c, int op)
{
    return (uint64_t)(uintptr_t)c | (uint64_t)op;
}

static void arm_accept(worker_t *w)
{
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_multishot_accept(sqe, w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, OP_ACCEPT);
    w->accept_armed = 1;
}

static void arm_tick(worker_t *w)
{
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_timeout(sqe, &w->tick_ts, 0, 0);
    io_uring_sqe_set_data64(sqe, OP_TICK);
}

static void arm_recv(worker_t *w, conn_t *c)
{
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
    io_uring_sqe_set_data64(sqe, tag(c, OP_RECV));
}

static void arm_send(worker_t *w, conn_t *c)
{
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_send(sqe, c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, tag(c, OP_SEND));
}

/* A recv whose bytes are dropped, given up after linger_ts (a linked timeout). */
static void arm_drain(worker_t *w, conn_t *c)
{
    if (io_uring_sq_space_left(&w->ring) < 2)
        io_uring_submit(&w->ring); /* the recv and its timeout must go in one submission */
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_recv(sqe, c->fd, c->in, IN_CAP, 0);
    io_uring_sqe_set_data64(sqe, tag(c, OP_DRAIN));
    sqe->flags |= IOSQE_IO_LINK;
    sqe = get_sqe(w);
    io_uring_prep_link_timeout(sqe, &w->linger_ts, 0);
    io_uring_sqe_set_data64(sqe, OP_IGNORE);
}

static conn_t *conn_new(worker_t *w, int fd)
{
    conn_t *c = w->free_list;
    if (c != NULL) {
        w->free_list = c->next_free;
        w->free_count--;
    } else if ((c = malloc(sizeof(*c))) == NULL) {
        return NULL;
    }
    c->fd = fd;
    c->in_len = c->out_len = c->out_sent = c->drained = 0;
    c->closing = c->continue_sent = 0;
    c->next_free = NULL;
    return c;
}

/* Only ever called with no operation of `c` in flight. */
static void conn_free(worker_t *w, conn_t *c)
{
    close(c->fd);
    if (w->free_count < FREE_MAX) {
        c->next_free = w->free_list;
        w->free_list = c;
        w->free_count++;
    } else {
        free(c);
    }
}

/* Every answer sent and the connection to close: send our FIN, then read and drop what the
 * client still sends until it closes (or linger_ts passes, or DRAIN_MAX bytes), so that unread
 * bytes never turn our close into a reset that could destroy the answer in flight. */
static void conn_linger(worker_t *w, conn_t *c)
{
    if (shutdown(c->fd, SHUT_WR) != 0) {
        conn_free(w, c);
        return;
    }
    arm_drain(w, c);
}

/* ---- answers ----------------------------------------------------------------------------- */

enum { KEEP = 0, CLOSE = 1, KEEP_ALIVE_10 = 2 };

static void answer_200(worker_t *w, conn_t *c, const char *body, size_t len, int head_only, int conn_mode)
{
    char *o = c->out + c->out_len;
    memcpy(o, w->h200, w->h200_len);
    o += w->h200_len;
    o = put_u64(o, len);
    PUT(o, "\r\n");
    if (conn_mode == CLOSE)
        PUT(o, "Connection: close\r\n");
    else if (conn_mode == KEEP_ALIVE_10)
        PUT(o, "Connection: keep-alive\r\n");
    PUT(o, "\r\n");
    if (!head_only) {
        memcpy(o, body, len);
        o += len;
    }
    c->out_len = (uint32_t)(o - c->out);
}

/* Any other status; conn_mode CLOSE adds Connection: close and closes once it is sent. */
static void answer_status(worker_t *w, conn_t *c, int status, const char *allow, int head_only, int conn_mode)
{
    const char *reason;
    switch (status) {
    case 400: reason = "Bad Request"; break;
    case 404: reason = "Not Found"; break;
    case 405: reason = "Method Not Allowed"; break;
    case 413: reason = "Content Too Large"; break;
    case 414: reason = "URI Too Long"; break;
    case 431: reason = "Request Header Fields Too Large"; break;
    case 501: reason = "Not Implemented"; break;
    case 505: reason = "HTTP Version Not Supported"; break;
    default: reason = "Internal Server Error"; status = 500; break;
    }
    size_t room = OUT_CAP - c->out_len;
    int n = snprintf(c->out + c->out_len, room,
                     "HTTP/1.1 %d %s\r\nServer: *\r\nDate: %s\r\n%s%s%sContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n%s\r\n%s",
                     status, reason, w->date, allow ? "Allow: " : "", allow ? allow : "", allow ? "\r\n" : "",
                     strlen(reason),
                     conn_mode == CLOSE           ? "Connection: close\r\n"
                     : conn_mode == KEEP_ALIVE_10 ? "Connection: keep-alive\r\n"
                                                  : "",
                     head_only ? "" : reason);
    if (n > 0 && (size_t)n < room)
        c->out_len += (uint32_t)n;
    if (conn_mode == CLOSE)
        c->closing = 1;
}

/* A malformed or refused request: its status, Connection: close, and nothing more is read. */
static size_t reject(worker_t *w, conn_t *c, int status, size_t len)
{
    answer_status(w, c, status, NULL, 0, CLOSE);
    return len ? len : 1;
}

/* ---- requests ---------------------------------------------------------------------------- */

/* The chunked body starting at p: bytes taken (> 0), 0 incomplete, -400 or -413. The decoded
 * body goes to out (capacity IN_CAP), its length to *out_len. */
static long dechunk(const char *p, const char *end, char *out, size_t *out_len)
{
    const char *q = p;
    size_t have = 0;
    for (;;) {
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        if (nl == NULL)
            return end - q > 1024 ? -400 : 0;
        const char *le = nl > q && nl[-1] == '\r' ? nl - 1 : nl;
        const char *d = q;
        uint64_t size = 0;
        while (d < le && ((*d >= '0' && *d <= '9') || ((*d | 0x20) >= 'a' && (*d | 0x20) <= 'f'))) {
            if (size > IN_CAP)
                return -413;
            size = size * 16 + (uint64_t)(*d <= '9' ? *d - '0' : (*d | 0x20) - 'a' + 10);
            d++;
        }
        if (d == q)
            return -400;
        while (d < le && (*d == ' ' || *d == '\t'))
            d++;
        if (d < le && *d != ';')
            return -400;
        for (; d < le; d++) /* chunk extensions: skipped, but no control characters */
            if ((unsigned char)*d < 0x20 && *d != '\t')
                return -400;
        q = nl + 1;
        if (size == 0) { /* the last chunk, then trailer fields up to an empty line */
            for (;;) {
                nl = memchr(q, '\n', (size_t)(end - q));
                if (nl == NULL)
                    return 0;
                le = nl > q && nl[-1] == '\r' ? nl - 1 : nl;
                if (le == q) {
                    *out_len = have;
                    return nl + 1 - p;
                }
                for (const char *t = q; t < le; t++)
                    if (*t == '\r' || *t == '\0')
                        return -400;
                q = nl + 1;
            }
        }
        if (size > IN_CAP - have)
            return -413;
        if ((uint64_t)(end - q) < size + 1)
            return 0;
        memcpy(out + have, q, size);
        have += size;
        q += size;
        if (*q == '\r') {
            if (q + 1 >= end)
                return 0;
            if (q[1] != '\n')
                return -400;
            q += 2;
        } else if (*q == '\n') {
            q++;
        } else {
            return -400;
        }
    }
}

/* The sum of the query's integer values ("a=13&b=42" -> 55); returns 0 if the sum overflows. */
static int sum_query(const char *p, const char *end, int64_t *sum)
{
    *sum = 0;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        if (amp == NULL)
            amp = end;
        const char *eq = memchr(p, '=', (size_t)(amp - p));
        int64_t v;
        if (eq != NULL && parse_int(eq + 1, amp, &v) && __builtin_add_overflow(*sum, v, sum))
            return 0;
        p = amp + 1;
    }
    return 1;
}

/* One request from buf[0..len): bytes taken (> 0, its answer written into c->out), or 0 when
 * it is not whole yet. */
static size_t handle_one(worker_t *w, conn_t *c, const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;

    /* empty lines before a request line are ignored (RFC 9112 §2.2) */
    while (p < end && (*p == '\r' || *p == '\n')) {
        if (*p == '\r') {
            if (p + 1 == end)
                break;
            if (p[1] != '\n')
                return reject(w, c, 400, len);
            p++;
        }
        p++;
    }
    if (p > buf)
        return p - buf > HEAD_MAX ? reject(w, c, 400, len) : (size_t)(p - buf);
    if (p == end)
        return 0;

    /* request line: method SP request-target SP HTTP-version */
    const char *nl = memchr(p, '\n', len);
    if (nl == NULL)
        return len > HEAD_MAX ? reject(w, c, 414, len) : 0;
    if (nl - buf >= HEAD_MAX)
        return reject(w, c, 414, len);
    const char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    const char *method = p;
    while (p < le && is_tchar((unsigned char)*p))
        p++;
    size_t method_len = (size_t)(p - method);
    if (method_len == 0 || p == le || *p != ' ')
        return reject(w, c, 400, len);
    const char *target = ++p;
    while (p < le && (unsigned char)*p > 0x20 && *p != 0x7f)
        p++;
    const char *target_end = p;
    if (target == target_end || p == le || *p != ' ')
        return reject(w, c, 400, len);
    p++;
    if (le - p != 8 || memcmp(p, "HTTP/", 5) != 0 || p[6] != '.' || p[5] < '0' || p[5] > '9' || p[7] < '0' ||
        p[7] > '9')
        return reject(w, c, 400, len);
    if (p[5] != '1')
        return reject(w, c, 505, len);
    int minor = p[7] - '0';

    /* header fields */
    int fields = 0, hosts = 0, te_count = 0, te_chunked = 0, has_cl = 0, conn_close = 0, conn_ka = 0;
    int expect_continue = 0;
    uint64_t cl = 0;
    p = nl + 1;
    for (;;) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            return len > HEAD_MAX ? reject(w, c, 431, len) : 0;
        if (nl - buf >= HEAD_MAX)
            return reject(w, c, 431, len);
        le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (le == p) {
            p = nl + 1;
            break;
        }
        if (++fields > FIELDS_MAX)
            return reject(w, c, 431, len);
        const char *name = p;
        while (p < le && is_tchar((unsigned char)*p))
            p++;
        size_t name_len = (size_t)(p - name);
        if (name_len == 0 || p == le || *p != ':') /* also obs-fold and space before the colon */
            return reject(w, c, 400, len);
        const char *v = p + 1, *ve = le;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        for (const char *t = v; t < ve; t++)
            if (((unsigned char)*t < 0x20 && *t != '\t') || *t == 0x7f)
                return reject(w, c, 400, len);
        switch (name_len) {
        case 4:
            if (eq_nocase(name, 4, "host"))
                hosts++;
            break;
        case 6:
            if (eq_nocase(name, 6, "expect") && eq_nocase(v, (size_t)(ve - v), "100-continue"))
                expect_continue = 1;
            break;
        case 10:
            if (eq_nocase(name, 10, "connection")) {
                for (const char *t = v; t < ve;) {
                    const char *comma = memchr(t, ',', (size_t)(ve - t));
                    const char *te = comma ? comma : ve, *ts = t;
                    while (ts < te && (*ts == ' ' || *ts == '\t'))
                        ts++;
                    while (te > ts && (te[-1] == ' ' || te[-1] == '\t'))
                        te--;
                    if (eq_nocase(ts, (size_t)(te - ts), "close"))
                        conn_close = 1;
                    else if (eq_nocase(ts, (size_t)(te - ts), "keep-alive"))
                        conn_ka = 1;
                    t = comma ? comma + 1 : ve;
                }
            }
            break;
        case 14:
            if (eq_nocase(name, 14, "content-length")) {
                uint64_t n = 0;
                if (v == ve)
                    return reject(w, c, 400, len);
                for (const char *t = v; t < ve; t++) {
                    if (*t < '0' || *t > '9')
                        return reject(w, c, 400, len);
                    if (n > (uint64_t)1 << 40)
                        return reject(w, c, 413, len);
                    n = n * 10 + (uint64_t)(*t - '0');
                }
                if (has_cl && n != cl)
                    return reject(w, c, 400, len);
                has_cl = 1;
                cl = n;
            }
            break;
        case 17:
            if (eq_nocase(name, 17, "transfer-encoding")) {
                te_count++;
                te_chunked = eq_nocase(v, (size_t)(ve - v), "chunked");
            }
            break;
        }
        p = nl + 1;
    }
    size_t head_len = (size_t)(p - buf);

    if (hosts > 1 || (minor >= 1 && hosts == 0))
        return reject(w, c, 400, len);
    if (te_count > 0) {
        if (minor == 0 || has_cl) /* RFC 9112 §6.1: faulty framing */
            return reject(w, c, 400, len);
        if (te_count > 1 || !te_chunked)
            return reject(w, c, 501, len);
    }

    /* body */
    const char *body = NULL;
    size_t body_len = 0;
    if (te_count > 0) {
        long n = dechunk(p, end, w->scratch, &body_len);
        if (n < 0)
            return reject(w, c, (int)-n, len);
        if (n == 0)
            goto incomplete;
        body = w->scratch;
        p += n;
    } else if (has_cl) {
        if (cl > IN_CAP - head_len)
            return reject(w, c, 413, len);
        if ((uint64_t)(end - p) < cl)
            goto incomplete;
        body = p;
        body_len = (size_t)cl;
        p += cl;
    }

    int keep = minor >= 1 ? !conn_close : (conn_ka && !conn_close);
    int conn_mode = !keep ? CLOSE : minor == 0 ? KEEP_ALIVE_10 : KEEP;
    c->continue_sent = 0;

    /* route on the path (absolute-form targets reduced to theirs) */
    const char *path = target, *query = target_end;
    if ((size_t)(target_end - target) > 7 && (eq_nocase(target, 7, "http://") || eq_nocase(target, 8, "https://"))) {
        const char *s = memchr(target + 7, '/', (size_t)(target_end - target - 7));
        path = s ? s : target_end;
    } else if (*target != '/') {
        return reject(w, c, 400, len);
    }
    const char *qm = memchr(path, '?', (size_t)(target_end - path));
    const char *path_end = qm ? qm : target_end;
    if (qm)
        query = qm + 1;
    size_t path_len = (size_t)(path_end - path);
    int get = method_len == 3 && memcmp(method, "GET", 3) == 0;
    int head = method_len == 4 && memcmp(method, "HEAD", 4) == 0;
    int post = method_len == 4 && memcmp(method, "POST", 4) == 0;

    if (path_len == 9 && memcmp(path, "/pipeline", 9) == 0) {
        if (!get && !head)
            answer_status(w, c, 405, "GET, HEAD", 0, conn_mode);
        else if (get && conn_mode == KEEP) {
            memcpy(c->out + c->out_len, w->pipeline, w->pipeline_len);
            c->out_len += (uint32_t)w->pipeline_len;
        } else {
            answer_200(w, c, "ok", 2, head, conn_mode);
        }
    } else if (path_len == 11 && memcmp(path, "/baseline11", 11) == 0) {
        if (!get && !head && !post) {
            answer_status(w, c, 405, "GET, HEAD, POST", 0, conn_mode);
        } else {
            int64_t sum, v = 0;
            if (!sum_query(query, target_end, &sum))
                return reject(w, c, 400, len);
            if (post && body_len > 0) {
                const char *b = body, *be = body + body_len;
                while (b < be && (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n'))
                    b++;
                while (be > b && (be[-1] == ' ' || be[-1] == '\t' || be[-1] == '\r' || be[-1] == '\n'))
                    be--;
                if ((b < be && !parse_int(b, be, &v)) || __builtin_add_overflow(sum, v, &sum))
                    return reject(w, c, 400, len);
            }
            char digits[24];
            char *e = put_i64(digits, sum);
            answer_200(w, c, digits, (size_t)(e - digits), head, conn_mode);
        }
    } else {
        answer_status(w, c, 404, NULL, head, conn_mode);
    }
    if (conn_mode == CLOSE)
        c->closing = 1;
    return (size_t)(p - buf);

incomplete:
    if (expect_continue && minor >= 1 && !c->continue_sent) {
        char *o = c->out + c->out_len;
        PUT(o, "HTTP/1.1 100 Continue\r\n\r\n");
        c->out_len = (uint32_t)(o - c->out);
        c->continue_sent = 1;
    }
    return 0;
}

/* Answers every whole request in c->in, then sends the batch, or closes, or reads on. Called
 * with nothing of c in flight. */
static void serve(worker_t *w, conn_t *c)
{
    size_t at = 0;
    int whole = 1;
    while (!c->closing && at < c->in_len) {
        if (OUT_CAP - c->out_len < RESP_MAX)
            break; /* the slab is full: send it, and go on once it is out */
        size_t n = handle_one(w, c, c->in + at, c->in_len - at);
        if (n == 0) {
            whole = 0;
            break;
        }
        at += n;
    }
    if (at > 0) {
        c->in_len -= (uint32_t)at;
        memmove(c->in, c->in + at, c->in_len);
    }
    if (!whole && !c->closing && c->in_len == IN_CAP) /* a request that cannot fit */
        answer_status(w, c, 413, NULL, 0, CLOSE);
    if (c->out_len > c->out_sent)
        arm_send(w, c);
    else if (c->closing)
        conn_linger(w, c);
    else
        arm_recv(w, c);
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void on_cqe(worker_t *w, struct io_uring_cqe *cqe)
{
    uint64_t data = io_uring_cqe_get_data64(cqe);
    int op = (int)(data & 7);
    conn_t *c = (conn_t *)(uintptr_t)(data & ~(uint64_t)7);
    int res = cqe->res;

    switch (op) {
    case OP_ACCEPT:
        if (res >= 0) {
            int one = 1;
            (void)setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            conn_t *nc = conn_new(w, res);
            if (nc == NULL)
                close(res);
            else
                arm_recv(w, nc);
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) {
            /* the multishot accept ended: again now, or at the next tick after an error
             * (EMFILE and the like), so that a failing accept does not spin */
            w->accept_armed = 0;
            if (res >= 0)
                arm_accept(w);
        }
        break;
    case OP_TICK:
        refresh_date(w);
        arm_tick(w);
        if (!w->accept_armed)
            arm_accept(w);
        break;
    case OP_RECV:
        if (res <= 0) { /* the client closed or reset */
            conn_free(w, c);
            break;
        }
        c->in_len += (uint32_t)res;
        serve(w, c);
        break;
    case OP_SEND:
        if (res <= 0) { /* reset, broken pipe */
            conn_free(w, c);
            break;
        }
        c->out_sent += (uint32_t)res;
        if (c->out_sent < c->out_len) { /* partial: the rest */
            arm_send(w, c);
            break;
        }
        c->out_len = c->out_sent = 0;
        serve(w, c); /* requests left over when the slab filled, or close, or read on */
        break;
    case OP_DRAIN:
        if (res > 0 && (c->drained += (uint32_t)res) < DRAIN_MAX)
            arm_drain(w, c);
        else
            conn_free(w, c); /* the client's FIN, an error, or the linger timeout (-ECANCELED) */
        break;
    default: /* OP_IGNORE: a linked timeout's own completion */
        break;
    }
}

static int ring_init(worker_t *w)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, /* kernel 6.1 */
        IORING_SETUP_COOP_TASKRUN,                               /* 5.19 */
        0,
    };
    int ret = -EINVAL;
    for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
        struct io_uring_params params;
        memset(&params, 0, sizeof(params));
        params.flags = flag_sets[i];
        ret = io_uring_queue_init_params(RING_ENTRIES, &w->ring, &params);
        if (ret != -EINVAL)
            break;
    }
    return ret;
}

static void *run_worker(void *arg)
{
    worker_t *w = arg;
    /* the ring is made on the thread that submits to it (SINGLE_ISSUER) */
    int ret = ring_init(w);
    w->init_err = ret < 0 ? -ret : 0;
    pthread_barrier_wait(&started);
    if (ret < 0)
        return NULL;
    w->linger_ts.tv_sec = 2;
    w->linger_ts.tv_nsec = 0;
    refresh_date(w);
    arm_accept(w);
    arm_tick(w);
    for (;;) {
        ret = io_uring_submit_and_wait(&w->ring, 1);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME)
            die(1, "io_uring_enter: %s", strerror(-ret));
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&w->ring, head, cqe)
        {
            on_cqe(w, cqe);
            seen++;
        }
        io_uring_cq_advance(&w->ring, seen);
    }
    return NULL;
}

/* ---- startup ----------------------------------------------------------------------------- */

/* A listening socket on `addr` ("host:port" or "[v6]:port"), one per worker via SO_REUSEPORT. */
static int listen_on(const char *addr)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(host) || colon[1] == '\0')
        die(2, "bad address %s (want HOST:PORT)", addr);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    if (getaddrinfo(h, colon + 1, &hints, &res) != 0)
        die(2, "cannot resolve %s", addr);
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, LISTEN_BACKLOG) != 0)
        die(2, "cannot listen on %s: %s", addr, strerror(errno));
    freeaddrinfo(res);
    return fd;
}

int main(int argc, char **argv)
{
    static const char *const ignored[] = {"--tls", "--cert", "--key", "--h2c", "--static", "--dataset",
                                          "--database-url"};
    const char *h1 = NULL;
    long workers = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        size_t k = 0;
        while (k < sizeof(ignored) / sizeof(ignored[0]) && strcmp(flag, ignored[k]) != 0)
            k++;
        if (strcmp(flag, "--h1") != 0 && strcmp(flag, "--workers") != 0 && k == sizeof(ignored) / sizeof(ignored[0]))
            die(2, "unknown flag %s", flag);
        if (value == NULL)
            die(2, "%s needs a value", flag);
        if (strcmp(flag, "--h1") == 0) {
            h1 = value;
        } else if (strcmp(flag, "--workers") == 0) {
            char *stop;
            errno = 0;
            workers = strtol(value, &stop, 10);
            if (errno != 0 || *stop != '\0' || workers < 1 || workers > 1024)
                die(2, "bad --workers %s", value);
        }
    }
    if (h1 == NULL)
        die(2, "%s", "--h1 HOST:PORT is required");
    if (workers == 0) { /* the CPUs this process may run on, as libreactorng counts them */
        cpu_set_t set;
        workers = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
        if (workers < 1)
            workers = 1;
    }

    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }

    /* every listener is bound before any worker runs, so a bad address fails at once */
    worker_t *ws = calloc((size_t)workers, sizeof(worker_t));
    if (ws == NULL)
        die(1, "%s", "out of memory");
    for (long i = 0; i < workers; i++)
        ws[i].listen_fd = listen_on(h1);

    pthread_barrier_init(&started, NULL, (unsigned)workers + 1);
    pthread_t *threads = calloc((size_t)workers, sizeof(pthread_t));
    for (long i = 0; i < workers; i++)
        if (threads == NULL || pthread_create(&threads[i], NULL, run_worker, &ws[i]) != 0)
            die(1, "%s", "cannot start a worker thread");
    pthread_barrier_wait(&started);
    for (long i = 0; i < workers; i++)
        if (ws[i].init_err != 0)
            die(1, "io_uring_queue_init: %s (is io_uring disabled or filtered by seccomp?)",
                strerror(ws[i].init_err));
    for (long i = 0; i < workers; i++)
        pthread_join(threads[i], NULL);
    return 0;
}
