// Command fasthttp-arena is linerate's arena peer on fasthttp v1.69.0, set up as HttpArena's
// frameworks/go-fasthttp entry (main.go, Dockerfile, go.mod in MDA2AV/HttpArena): one
// goroutine per worker, each with its own reuseport.Listen("tcp4", …) listener and its own
// fasthttp.Server whose only setting is MaxRequestBodySize = 25 MiB; workers default to
// runtime.NumCPU() and GOMAXPROCS is set to the worker count. With --tls every worker also
// binds the TLS address and serves it with ServeTLS (the newer entry's 8081 listener).
//
// This file holds the command line, the listeners and the router; the handlers are in
// handlers.go (baseline, pipeline, json, upload, echo, static) and db.go (async-db, crud).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/reuseport"
)

// maxBody is the entry's MaxRequestBodySize (25 MiB), the one Server field it sets.
const maxBody = 25 * 1024 * 1024

// config is the arena's common peer command line.
type config struct {
	h1, tls, h2c    string
	cert, key       string
	static, dataset string
	databaseURL     string
	workers         int
}

// app is what the handlers share: the dataset, the static directory, the database pool and
// the crud cache.
type app struct {
	dataset   []Item
	staticDir string
	db        *pgxpool.Pool
	cache     *ttlCache
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("fasthttp-arena", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.h1, "h1", "", "plain HTTP/1.1 listen address")
	fs.StringVar(&c.tls, "tls", "", "HTTPS listen address")
	fs.StringVar(&c.cert, "cert", "", "TLS certificate (PEM)")
	fs.StringVar(&c.key, "key", "", "TLS private key (PEM)")
	fs.StringVar(&c.h2c, "h2c", "", "h2c listen address (accepted, not served: fasthttp is HTTP/1.1)")
	fs.StringVar(&c.static, "static", "", "directory served under /static/")
	fs.StringVar(&c.dataset, "dataset", "", "dataset.json for /json/{count}")
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL URL for /async-db and /crud")
	fs.IntVar(&c.workers, "workers", runtime.NumCPU(), "worker goroutines, each with its own listener and Server")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.h1 == "" && c.tls == "":
		return c, errors.New("nothing to serve: give --h1 and/or --tls")
	case c.tls != "" && (c.cert == "" || c.key == ""):
		return c, errors.New("--tls needs --cert and --key")
	case c.workers < 1:
		return c, fmt.Errorf("--workers %d: must be at least 1", c.workers)
	}
	return c, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fasthttp-arena:", err)
	os.Exit(1)
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fail(err)
	}
	runtime.GOMAXPROCS(c.workers)

	a := &app{staticDir: c.static}
	if c.dataset != "" {
		if a.dataset, err = loadDataset(c.dataset); err != nil {
			fail(err)
		}
	}
	if c.databaseURL != "" {
		if a.db, err = openPool(c.databaseURL, c.workers); err != nil {
			fail(err)
		}
		a.cache = newTTLCache(crudTTL)
	}

	// Listen on every address before serving, so a bad address ends the process at once.
	var servers []func() error
	for range c.workers {
		if c.h1 != "" {
			ln, err := reuseport.Listen("tcp4", c.h1)
			if err != nil {
				fail(err)
			}
			s := &fasthttp.Server{Handler: a.route, MaxRequestBodySize: maxBody}
			servers = append(servers, func() error { return s.Serve(ln) })
		}
		if c.tls != "" {
			ln, err := reuseport.Listen("tcp4", c.tls)
			if err != nil {
				fail(err)
			}
			s := &fasthttp.Server{Handler: a.route, MaxRequestBodySize: maxBody}
			servers = append(servers, func() error { return s.ServeTLS(ln, c.cert, c.key) })
		}
	}
	errs := make(chan error, len(servers))
	for _, serve := range servers {
		go func() { errs <- serve() }()
	}
	fail(<-errs)
}

// route is the entry's dispatch: GET, POST and PUT only, then by path, with every path under
// /baseline (baseline11, baseline2) answered by the sum handler.
func (a *app) route(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Server", "go-fasthttp")
	method := string(ctx.Method())
	if method != fasthttp.MethodGet && method != fasthttp.MethodPost && method != fasthttp.MethodPut {
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	path := string(ctx.Path())
	switch {
	case path == "/pipeline":
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("ok")
	case strings.HasPrefix(path, "/json/"):
		count, _ := strconv.Atoi(path[len("/json/"):])
		a.json(ctx, count)
	case path == "/upload":
		ctx.SetContentType("text/plain")
		ctx.SetBodyString(strconv.Itoa(len(ctx.PostBody())))
	case path == "/echo" && method == fasthttp.MethodPost:
		echo(ctx)
	case path == "/async-db":
		a.asyncDB(ctx)
	case strings.HasPrefix(path, "/static/"):
		a.static(ctx, path[len("/static/"):])
	case path == "/crud/items":
		if method == fasthttp.MethodPost {
			a.crudCreate(ctx)
		} else {
			a.crudList(ctx)
		}
	case strings.HasPrefix(path, "/crud/items/"):
		id, err := strconv.Atoi(path[len("/crud/items/"):])
		switch {
		case err != nil:
			ctx.SetStatusCode(fasthttp.StatusNotFound)
		case method == fasthttp.MethodPut:
			a.crudUpdate(ctx, id)
		default:
			a.crudRead(ctx, id)
		}
	case strings.HasPrefix(path, "/baseline"):
		baseline(ctx)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
}
