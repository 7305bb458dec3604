/*
 * h2o-h2c-arena: the lab arena's h2o peer for HttpArena's baseline-h2c and json-h2c profiles.
 *
 * It follows HttpArena's `frameworks/h2o-h2c` entry (src/main.c, meta.json, Dockerfile),
 * built here on Debian bookworm's packaged libh2o-evloop 2.2.5 and cJSON 1.7.15:
 * - one thread per worker (default: online CPUs, sysconf(_SC_NPROCESSORS_ONLN), as the entry),
 *   each running its own h2o_evloop with its own SO_REUSEPORT listener (SO_REUSEADDR,
 *   TCP_NODELAY, backlog 4096);
 * - the accept callback hands each socket straight to h2o_http2_accept: prior-knowledge h2c
 *   only, so an HTTP/1.1 client fails at the connection preface;
 * - h2o_config_init defaults (no HTTP/2 setting changed), server name "h2o";
 * - GET /baseline2?a=&b= answers the sum as text/plain; GET /json/{count}?m=N answers the
 *   dataset's first `count` items, each with total = price * quantity * m, serialized per
 *   request with cJSON as application/json.
 *
 * Command line (the arena peers' common flags; those it does not use are accepted and
 * ignored): --h2c ADDR:PORT [--dataset FILE] [--workers N]
 *           [--h1 A] [--tls A] [--cert F] [--key F] [--static DIR] [--database-url URL]
 */
#define H2O_USE_LIBUV 0

#include <cjson/cJSON.h>
#include <errno.h>
#include <h2o.h>
#include <h2o/http2.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static h2o_globalconf_t config;
static const cJSON *dataset; /* read-only after startup, shared by every worker */
static int dataset_len;

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("h2o-h2c-arena: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    exit(2);
}

/* The value of query parameter `name` as an integer; `fallback` when absent or not a number. */
static long long query_int(const h2o_req_t *req, const char *name, long long fallback)
{
    if (req->query_at == SIZE_MAX)
        return fallback;
    size_t name_len = strlen(name);
    const char *p = req->path.base + req->query_at + 1, *end = req->path.base + req->path.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        if (amp == NULL)
            amp = end;
        if ((size_t)(amp - p) > name_len && memcmp(p, name, name_len) == 0 && p[name_len] == '=') {
            char digits[24];
            size_t len = (size_t)(amp - p) - name_len - 1;
            if (len == 0 || len >= sizeof(digits))
                return fallback;
            memcpy(digits, p + name_len + 1, len);
            digits[len] = '\0';
            char *stop;
            long long v = strtoll(digits, &stop, 10);
            return *stop == '\0' ? v : fallback;
        }
        p = amp + 1;
    }
    return fallback;
}

static void respond(h2o_req_t *req, const char *type, size_t type_len, const char *body, size_t len)
{
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = len;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, type, type_len);
    h2o_send_inline(req, body, len);
}

static int only_get(h2o_req_t *req)
{
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")))
        return 1;
    h2o_send_error_405(req, "Method Not Allowed", "Method Not Allowed", 0);
    return 0;
}

static int on_baseline2(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    if (!only_get(req))
        return 0;
    char body[32];
    int len = snprintf(body, sizeof(body), "%lld", query_int(req, "a", 0) + query_int(req, "b", 0));
    respond(req, H2O_STRLIT("text/plain"), body, (size_t)len);
    return 0;
}

/* An item's integer field; 0 when it is missing or not a number. */
static long long int_field(const cJSON *item, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, name);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

static int on_json(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    if (!only_get(req))
        return 0;
    /* path_normalized is "/json/{count}" without the query; counts past the dataset clamp */
    size_t prefix = sizeof("/json/") - 1;
    if (req->path_normalized.len <= prefix) {
        h2o_send_error_404(req, "Not Found", "Not Found", 0);
        return 0;
    }
    long count = 0;
    for (size_t i = prefix; i < req->path_normalized.len; i++) {
        char c = req->path_normalized.base[i];
        if (c < '0' || c > '9') {
            h2o_send_error_404(req, "Not Found", "Not Found", 0);
            return 0;
        }
        if (count <= dataset_len)
            count = count * 10 + (c - '0');
    }
    if (count > dataset_len)
        count = dataset_len;
    long long m = query_int(req, "m", 1);

    cJSON *root = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(root, "items");
    const cJSON *src = dataset != NULL ? dataset->child : NULL;
    for (long i = 0; i < count && src != NULL; i++, src = src->next) {
        cJSON *item = cJSON_Duplicate(src, 1);
        cJSON_AddNumberToObject(item, "total", (double)(int_field(item, "price") * int_field(item, "quantity") * m));
        cJSON_AddItemToArray(items, item);
    }
    cJSON_AddNumberToObject(root, "count", (double)count);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (body == NULL) {
        h2o_send_error_500(req, "Internal Server Error", "out of memory", 0);
        return 0;
    }
    respond(req, H2O_STRLIT("application/json"), body, strlen(body));
    free(body);
    return 0;
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    if (err != NULL)
        return;
    h2o_socket_t *sock;
    while ((sock = h2o_evloop_socket_accept(listener)) != NULL) {
        struct timeval now;
        gettimeofday(&now, NULL);
        h2o_http2_accept(listener->data, sock, now);
    }
}

static void *run_worker(void *arg)
{
    int fd = (int)(intptr_t)arg;
    h2o_evloop_t *loop = h2o_evloop_create();
    h2o_context_t ctx;
    h2o_context_init(&ctx, loop, &config);
    h2o_accept_ctx_t accept_ctx = {.ctx = &ctx, .hosts = config.hosts};
    h2o_socket_t *listener = h2o_evloop_socket_create(loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    listener->data = &accept_ctx;
    h2o_socket_read_start(listener, on_accept);
    while (h2o_evloop_run(loop, INT32_MAX) == 0)
        ;
    return NULL;
}

/* A listening socket on `addr` ("host:port" or "[v6]:port"), one per worker via SO_REUSEPORT. */
static int listen_on(const char *addr)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
        die("bad address %s (want HOST:PORT)", addr);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    if (getaddrinfo(h, colon + 1, &hints, &res) != 0)
        die("cannot resolve %s", addr);
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 4096) != 0)
        die("cannot listen on %s", addr);
    freeaddrinfo(res);
    return fd;
}

static void load_dataset(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die("cannot open dataset %s", path);
    char *text = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (cap - len < 65536 && (text = realloc(text, cap = cap * 2 + 65536)) == NULL)
            die("out of memory reading %s", path);
        n = fread(text + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsArray(doc))
        die("dataset %s is not a JSON array", path);
    dataset = doc;
    dataset_len = cJSON_GetArraySize(doc);
}

static void route(h2o_hostconf_t *host, const char *path, int (*on_req)(h2o_handler_t *, h2o_req_t *))
{
    h2o_pathconf_t *pathconf = h2o_config_register_path(host, path, 0);
    h2o_create_handler(pathconf, sizeof(h2o_handler_t))->on_req = on_req;
}

int main(int argc, char **argv)
{
    static const char *const ignored[] = {"--h1", "--tls", "--cert", "--key", "--static", "--database-url"};
    const char *h2c = NULL, *dataset_path = NULL;
    long workers = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (value == NULL)
            die("%s needs a value", flag);
        if (strcmp(flag, "--h2c") == 0) {
            h2c = value;
        } else if (strcmp(flag, "--dataset") == 0) {
            dataset_path = value;
        } else if (strcmp(flag, "--workers") == 0) {
            char *stop;
            errno = 0;
            workers = strtol(value, &stop, 10);
            if (errno != 0 || *stop != '\0' || workers < 1 || workers > 1024)
                die("bad --workers %s", value);
        } else {
            size_t k = 0;
            while (k < sizeof(ignored) / sizeof(ignored[0]) && strcmp(flag, ignored[k]) != 0)
                k++;
            if (k == sizeof(ignored) / sizeof(ignored[0]))
                die("unknown flag %s", flag);
        }
    }
    if (h2c == NULL)
        die("%s", "--h2c HOST:PORT is required (this peer serves prior-knowledge h2c only)");
    if (workers < 1)
        workers = 1;
    if (dataset_path != NULL)
        load_dataset(dataset_path);

    signal(SIGPIPE, SIG_IGN);
    h2o_config_init(&config);
    config.server_name = h2o_iovec_init(H2O_STRLIT("h2o"));
    h2o_hostconf_t *host = h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    route(host, "/baseline2", on_baseline2);
    route(host, "/json/", on_json);

    /* every listener is bound before any worker runs, so a bad address fails at once */
    int *fds = calloc((size_t)workers, sizeof(int));
    for (long i = 0; i < workers; i++)
        fds[i] = listen_on(h2c);
    for (long i = 1; i < workers; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, run_worker, (void *)(intptr_t)fds[i]) != 0)
            die("%s", "cannot start a worker thread");
    }
    run_worker((void *)(intptr_t)fds[0]);
    return 0;
}
