// Handlers of the fasthttp arena peer that need no database, as HttpArena's
// frameworks/go-fasthttp/main.go answers them: the /baseline* sum, /json/{count}?m=N from the
// dataset (gzip at compress/gzip's default level when Accept-Encoding names gzip, no brotli),
// POST /echo, and /static/* read from disk on every request with the .br, then .gz, sibling
// picked by Accept-Encoding (the newer entry, which dropped fasthttp.FS's in-memory cache).
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// Rating is a dataset item's rating.
type Rating struct {
	Score int `json:"score"`
	Count int `json:"count"`
}

// Item is one entry of dataset.json.
type Item struct {
	ID       int      `json:"id"`
	Name     string   `json:"name"`
	Category string   `json:"category"`
	Price    int      `json:"price"`
	Quantity int      `json:"quantity"`
	Active   bool     `json:"active"`
	Tags     []string `json:"tags"`
	Rating   Rating   `json:"rating"`
}

// processedItem is an Item with its total for the request's multiplier.
type processedItem struct {
	Item
	Total int `json:"total"`
}

type processResponse struct {
	Items []processedItem `json:"items"`
	Count int             `json:"count"`
}

func loadDataset(path string) ([]Item, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var items []Item
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, err
	}
	return items, nil
}

// baseline answers a + b from the query, plus the integer body of a POST (Content-Length or
// chunked: fasthttp has read it whole before the handler runs).
func baseline(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	sum := args.GetUintOrZero("a") + args.GetUintOrZero("b")
	if body := ctx.PostBody(); len(body) > 0 {
		if n, err := strconv.Atoi(string(body)); err == nil {
			sum += n
		}
	}
	ctx.SetContentType("text/plain")
	ctx.SetBodyString(strconv.Itoa(sum))
}

// json serves the first count dataset items with total = price × quantity × m.
func (a *app) json(ctx *fasthttp.RequestCtx, count int) {
	count = min(max(count, 0), len(a.dataset))
	m, _ := strconv.Atoi(string(ctx.QueryArgs().Peek("m")))
	if m == 0 {
		m = 1
	}
	items := make([]processedItem, count)
	for i, d := range a.dataset[:count] {
		items[i] = processedItem{Item: d, Total: d.Price * d.Quantity * m}
	}
	body, err := json.Marshal(processResponse{Items: items, Count: count})
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/json")
	if !strings.Contains(string(ctx.Request.Header.Peek(fasthttp.HeaderAcceptEncoding)), "gzip") {
		ctx.SetBody(body)
		return
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	_, _ = gz.Write(body)
	_ = gz.Close()
	ctx.Response.Header.Set(fasthttp.HeaderContentEncoding, "gzip")
	ctx.SetBody(buf.Bytes())
}

// echo sends a POST body back byte for byte.
func echo(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/octet-stream")
	ctx.SetBody(ctx.PostBody())
}

// mimeTypes are the entry's content types by extension; anything else is octet-stream.
var mimeTypes = map[string]string{
	".css": "text/css", ".js": "application/javascript", ".html": "text/html",
	".woff2": "font/woff2", ".svg": "image/svg+xml", ".webp": "image/webp",
	".json": "application/json",
}

// static reads /static/<name> from disk on every request, preferring the precompressed .br
// and then .gz sibling when Accept-Encoding names that coding.
func (a *app) static(ctx *fasthttp.RequestCtx, name string) {
	if a.staticDir == "" || name == "" || strings.Contains(name, "/") || strings.Contains(name, "..") {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	base := filepath.Join(a.staticDir, name)
	path, enc := base, ""
	ae := string(ctx.Request.Header.Peek(fasthttp.HeaderAcceptEncoding))
	for _, c := range [...]struct{ token, coding, suffix string }{
		{"br", "br", ".br"},
		{"gzip", "gzip", ".gz"},
	} {
		if strings.Contains(ae, c.token) {
			if _, err := os.Stat(base + c.suffix); err == nil {
				path, enc = base+c.suffix, c.coding
				break
			}
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	ct := mimeTypes[filepath.Ext(name)]
	if ct == "" {
		ct = "application/octet-stream"
	}
	ctx.SetContentType(ct)
	if enc != "" {
		ctx.Response.Header.Set(fasthttp.HeaderContentEncoding, enc)
		ctx.Response.Header.Set(fasthttp.HeaderVary, "Accept-Encoding")
	}
	ctx.SetBody(data)
}
