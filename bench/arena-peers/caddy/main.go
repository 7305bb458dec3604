// Command caddy-arena is linerate's arena peer on Caddy v2.11.9, set up as HttpArena's
// frameworks/caddy entry (Caddyfile, Dockerfile, httparena/ module, meta.json in
// MDA2AV/HttpArena): Caddy's standard modules plus one handler module of ours (sum.go, the
// entry's /baseline11 module, compiled in as xcaddy would), the admin endpoint and automatic
// HTTPS off, logs discarded; /pipeline answered by Caddy's own `header` + `respond` handlers,
// /static/* by its file_server, anything else by a 404 "Not Found".
//
// The config is Caddy's JSON, built here from the command line (config.go) and run with
// caddy.Load: no Caddyfile and no adapter, nothing persisted to disk. The plain listener
// (--h1) is the entry's :8080; the TLS one (--tls) is the arena's addition: the same routes
// over h1, h2 and HTTP/3 (QUIC on the UDP port of the same number), which Caddy serves itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"

	"github.com/caddyserver/caddy/v2"

	// Every module of the stock caddy binary (xcaddy builds on the same set).
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// options is the arena's common peer command line (bench/arena-peers/README.md).
type options struct {
	h1, tls, h2c    string
	cert, key       string
	static, dataset string
	databaseURL     string
	workers         int
}

const usage = "usage: caddy-arena --h1 HOST:PORT [--tls HOST:PORT --cert CERT --key KEY] " +
	"[--h2c ADDR] [--static DIR] [--dataset FILE] [--database-url URL] [--workers N]"

// parseArgs reads the command line; a usage error is returned as such (exit 2).
func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("caddy-arena", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.h1, "h1", "", "plain HTTP/1.1 listen address (the entry's :8080)")
	fs.StringVar(&o.tls, "tls", "", "TLS listen address: h1 and h2 over TCP, h3 over UDP, same port")
	fs.StringVar(&o.cert, "cert", "", "TLS certificate (PEM)")
	fs.StringVar(&o.key, "key", "", "TLS private key (PEM)")
	fs.StringVar(&o.h2c, "h2c", "", "accepted, not served (the entry serves no h2c)")
	fs.StringVar(&o.static, "static", "", "directory served under /static/ by file_server")
	fs.StringVar(&o.dataset, "dataset", "", "accepted, not used (no /json route in the entry)")
	fs.StringVar(&o.databaseURL, "database-url", "", "accepted, not used (no database route in the entry)")
	fs.IntVar(&o.workers, "workers", runtime.NumCPU(), "GOMAXPROCS")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.h1 == "" && o.tls == "":
		return o, errors.New("nothing to serve: give --h1 and/or --tls")
	case o.tls != "" && (o.cert == "" || o.key == ""):
		return o, errors.New("--tls needs --cert and --key")
	case o.workers < 1:
		return o, fmt.Errorf("--workers %d: must be at least 1", o.workers)
	}
	for _, a := range []string{o.h1, o.tls} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return o, fmt.Errorf("listen address %q: %v", a, err)
		}
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Println(usage)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "caddy-arena:", err)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(o.workers)

	cfg, err := buildConfig(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "caddy-arena:", err)
		os.Exit(1)
	}
	// Provisions every app and binds every listener before it returns: a bad address or an
	// unreadable certificate ends the process here, with Caddy's error.
	if err := caddy.Load(cfg, true); err != nil {
		fmt.Fprintln(os.Stderr, "caddy-arena:", err)
		os.Exit(1)
	}
	select {}
}
