// Command gobwas-ws-arena is HttpArena's frameworks/go-websocket entry written again for
// linerate's arena (linerate lab arena): a WebSocket echo server on net/http with
// github.com/gobwas/ws v1.4.0.
//
// Settings followed (HttpArena repository paths):
//   - frameworks/go-websocket/main.go: GOMAXPROCS = NumCPU; net/http serves one goroutine per
//     connection; /ws is upgraded with ws.UpgradeHTTP, then each message is read with
//     wsutil.ReadClientData and written back with wsutil.WriteServerMessage under the same
//     opcode (one read, one write per message, no buffering options). wsutil answers pings
//     with pongs and a close with a close while reading.
//   - frameworks/go-websocket/go.mod: gobwas/ws v1.4.0 (httphead v0.1.0, pool v0.2.1).
//   - frameworks/go-websocket/Dockerfile: CGO_ENABLED=0 build.
//
// Command line (the arena's peer contract): --h1 ADDR is served; --workers N sets GOMAXPROCS
// (default runtime.NumCPU(), the CPUs of the affinity mask); --tls --cert --key --h2c --static
// --dataset --database-url are accepted and ignored.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// echo upgrades the request and sends every data message back with its opcode until the
// client closes or the connection fails.
func echo(w http.ResponseWriter, r *http.Request) {
	conn, _, _, err := ws.UpgradeHTTP(r, w)
	if err != nil {
		// The upgrader has already answered (400 for a request without the upgrade).
		return
	}
	defer conn.Close()
	for {
		msg, op, err := wsutil.ReadClientData(conn)
		if err != nil {
			return
		}
		if err := wsutil.WriteServerMessage(conn, op, msg); err != nil {
			return
		}
	}
}

func main() {
	fs := flag.NewFlagSet("gobwas-ws-arena", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	h1 := fs.String("h1", "", "plain HTTP/1.1 listen address (serves /ws)")
	workers := fs.Int("workers", runtime.NumCPU(), "GOMAXPROCS")
	for _, name := range []string{"tls", "cert", "key", "h2c", "static", "dataset", "database-url"} {
		fs.String(name, "", "accepted and ignored")
	}
	fail := func(why string) {
		fmt.Fprintln(os.Stderr, "gobwas-ws-arena:", why)
		os.Exit(2)
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		fail(err.Error())
	}
	switch {
	case fs.NArg() > 0:
		fail("unexpected argument " + fs.Arg(0))
	case *h1 == "":
		fail("--h1 ADDR is required")
	case *workers < 1:
		fail("--workers must be a positive integer")
	}
	runtime.GOMAXPROCS(*workers)

	mux := http.NewServeMux()
	mux.HandleFunc("/ws", echo)
	ln, err := net.Listen("tcp", *h1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobwas-ws-arena:", err)
		os.Exit(1)
	}
	if err := http.Serve(ln, mux); err != nil {
		fmt.Fprintln(os.Stderr, "gobwas-ws-arena:", err)
		os.Exit(1)
	}
}
