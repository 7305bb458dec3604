package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// sumModuleID is the handler's Caddy module ID; in the JSON config it is
// {"handler": "arena_sum"}.
const sumModuleID = "http.handlers.arena_sum"

// maxSumBody caps what a POST body may hold: one integer is a few bytes, the rest is not read
// (the entry's module caps its read at 64 KiB too).
const maxSumBody = 64 << 10

func init() {
	caddy.RegisterModule(sumHandler{})
}

// sumHandler answers HttpArena's baseline contract (/baseline11 and /baseline2): the decimal sum
// of every integer query value, plus, on POST, the integer in the body (Content-Length or
// chunked: net/http has already decoded the framing), as text/plain with no trailing newline.
// Query values and bodies that are not integers add nothing. Methods other than GET and POST
// are answered 405, as the entry's module does. It takes no configuration.
type sumHandler struct{}

// CaddyModule registers it in Caddy's module namespace.
func (sumHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  sumModuleID,
		New: func() caddy.Module { return new(sumHandler) },
	}
}

// ServeHTTP answers the request; it is the end of its route (next is never called).
func (sumHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h := w.Header()
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		h.Set("Allow", "GET, POST")
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, err := io.WriteString(w, "Method Not Allowed")
		return err
	}
	total := querySum(r.URL.RawQuery)
	if r.Method == http.MethodPost {
		if n, ok := bodyInt(r.Body); ok {
			total += n
		}
	}
	var digits [20]byte
	out := strconv.AppendInt(digits[:0], total, 10)
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(out)
	return err
}

// querySum adds up the values of a raw query string (`a=1&b=2`) that parse as int64 once
// unescaped; keys are not looked at, and a pair without "=" or with a value that is not an
// integer adds nothing.
func querySum(raw string) int64 {
	var total int64
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		_, value, found := strings.Cut(pair, "=")
		if !found || value == "" {
			continue
		}
		if strings.ContainsAny(value, "%+") {
			unescaped, err := url.QueryUnescape(value)
			if err != nil {
				continue
			}
			value = unescaped
		}
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			total += n
		}
	}
	return total
}

// bodyInt reads at most maxSumBody bytes of body and parses them, surrounding white space
// trimmed, as an int64.
func bodyInt(body io.Reader) (int64, bool) {
	if body == nil || body == http.NoBody {
		return 0, false
	}
	data, err := io.ReadAll(io.LimitReader(body, maxSumBody))
	if err != nil {
		return 0, false
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(data), 10, 64)
	return n, err == nil
}

// Interface guards.
var (
	_ caddy.Module                = (*sumHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*sumHandler)(nil)
)
