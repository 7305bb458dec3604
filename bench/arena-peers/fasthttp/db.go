// Database handlers of the fasthttp arena peer, as HttpArena's frameworks/go-fasthttp/main.go
// answers them on a pgx/v5 pool of NumCPU×4 connections (here workers×4; workers defaults to
// NumCPU): /async-db (a price range, limit clamped to 1..50) and /crud/items[/{id}] (list,
// upsert, read, update). The entry caches crud reads in Redis (cache-aside, 200 ms TTL, key
// deleted on update) when the harness gives it REDIS_URL; the arena's command line has no
// Redis, so the same cache-aside runs in process here, shared by every worker.
package main

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"
)

// crudTTL is the entry's cache lifetime: crud reads and writes the same ids, so a long one
// would answer from a copy the writes have moved past.
const crudTTL = 200 * time.Millisecond

const itemColumns = "id, name, category, price, quantity, active, tags, rating_score, rating_count"

// dbItem is one items row as the entry writes it (tags is JSONB and goes out as stored).
type dbItem struct {
	ID       int             `json:"id"`
	Name     string          `json:"name"`
	Category string          `json:"category"`
	Price    int             `json:"price"`
	Quantity int             `json:"quantity"`
	Active   bool            `json:"active"`
	Tags     json.RawMessage `json:"tags"`
	Rating   Rating          `json:"rating"`
}

func openPool(url string, workers int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(workers * 4)
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

func (a *app) queryItems(ctx context.Context, sql string, args ...any) ([]dbItem, error) {
	rows, err := a.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	items := []dbItem{}
	for rows.Next() {
		var it dbItem
		var tags []byte
		if err := rows.Scan(&it.ID, &it.Name, &it.Category, &it.Price, &it.Quantity, &it.Active,
			&tags, &it.Rating.Score, &it.Rating.Count); err != nil {
			return nil, err
		}
		if len(tags) == 0 {
			tags = []byte("[]")
		}
		it.Tags = tags
		items = append(items, it)
	}
	return items, rows.Err()
}

func queryInt(ctx *fasthttp.RequestCtx, name string, fallback int) int {
	if n, err := strconv.Atoi(string(ctx.QueryArgs().Peek(name))); err == nil {
		return n
	}
	return fallback
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// dbMissing answers 500 when the peer was started without --database-url.
func (a *app) dbMissing(ctx *fasthttp.RequestCtx) bool {
	if a.db == nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "DB not available"})
		return true
	}
	return false
}

// asyncDB answers up to limit items priced in [min, max]; a failed query is an empty list,
// as the entry answers it.
func (a *app) asyncDB(ctx *fasthttp.RequestCtx) {
	if a.dbMissing(ctx) {
		return
	}
	lo, hi := queryInt(ctx, "min", 10), queryInt(ctx, "max", 50)
	limit := min(max(queryInt(ctx, "limit", 50), 1), 50)
	items, err := a.queryItems(context.Background(), "SELECT "+itemColumns+" FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3",
		lo, hi, limit)
	if err != nil {
		items = []dbItem{}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"items": items, "count": len(items)})
}

func (a *app) crudList(ctx *fasthttp.RequestCtx) {
	if a.dbMissing(ctx) {
		return
	}
	category := string(ctx.QueryArgs().Peek("category"))
	if category == "" {
		category = "electronics"
	}
	page := max(queryInt(ctx, "page", 1), 1)
	limit := min(max(queryInt(ctx, "limit", 10), 1), 50)
	items, err := a.queryItems(context.Background(), "SELECT "+itemColumns+" FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3",
		category, limit, (page-1)*limit)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "query failed"})
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"items": items, "total": len(items), "page": page, "limit": limit})
}

// crudBody is the JSON a crud POST or PUT carries.
type crudBody struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
	Price    int    `json:"price"`
	Quantity int    `json:"quantity"`
}

// crudCreate inserts the item, or updates name, price and quantity of an existing id.
func (a *app) crudCreate(ctx *fasthttp.RequestCtx) {
	if a.dbMissing(ctx) {
		return
	}
	var b crudBody
	if err := json.Unmarshal(ctx.PostBody(), &b); err != nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "insert failed"})
		return
	}
	if b.Name == "" {
		b.Name = "New Product"
	}
	if b.Category == "" {
		b.Category = "test"
	}
	var id int
	err := a.db.QueryRow(context.Background(), `INSERT INTO items (`+itemColumns+`)
		VALUES ($1, $2, $3, $4, $5, true, '["bench"]', 0, 0)
		ON CONFLICT (id) DO UPDATE SET name = $2, price = $4, quantity = $5 RETURNING id`,
		b.ID, b.Name, b.Category, b.Price, b.Quantity).Scan(&id)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "insert failed"})
		return
	}
	b.ID = id
	writeJSON(ctx, fasthttp.StatusCreated, b)
}

// crudRead is cache-aside: a cached body is a HIT, otherwise the row is read, cached for
// crudTTL and sent as a MISS.
func (a *app) crudRead(ctx *fasthttp.RequestCtx, id int) {
	if a.dbMissing(ctx) {
		return
	}
	if body, ok := a.cache.get(id); ok {
		ctx.Response.Header.Set("X-Cache", "HIT")
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
		return
	}
	items, err := a.queryItems(context.Background(), "SELECT "+itemColumns+" FROM items WHERE id = $1 LIMIT 1", id)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "query failed"})
		return
	}
	if len(items) == 0 {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	body, err := json.Marshal(items[0])
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	a.cache.set(id, body)
	ctx.Response.Header.Set("X-Cache", "MISS")
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// crudUpdate sets name, price and quantity, then drops the cached copy.
func (a *app) crudUpdate(ctx *fasthttp.RequestCtx, id int) {
	if a.dbMissing(ctx) {
		return
	}
	var b crudBody
	if err := json.Unmarshal(ctx.PostBody(), &b); err != nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "update failed"})
		return
	}
	if b.Name == "" {
		b.Name = "Updated"
	}
	tag, err := a.db.Exec(context.Background(), "UPDATE items SET name = $1, price = $2, quantity = $3 WHERE id = $4",
		b.Name, b.Price, b.Quantity, id)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusInternalServerError, map[string]string{"error": "update failed"})
		return
	}
	if tag.RowsAffected() == 0 {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	a.cache.drop(id)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"id": id, "name": b.Name, "price": b.Price, "quantity": b.Quantity})
}

// ttlCache stands in for the entry's Redis: JSON bodies by item id, each for a fixed time.
// Keys are item ids, so it holds at most one entry per row read.
type ttlCache struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[int]cached
}

type cached struct {
	body    []byte
	expires time.Time
}

func newTTLCache(ttl time.Duration) *ttlCache {
	return &ttlCache{ttl: ttl, m: make(map[int]cached)}
}

func (c *ttlCache) get(id int) ([]byte, bool) {
	c.mu.RLock()
	e, ok := c.m[id]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.expires) {
		return nil, false
	}
	return e.body, true
}

func (c *ttlCache) set(id int, body []byte) {
	c.mu.Lock()
	c.m[id] = cached{body: body, expires: time.Now().Add(c.ttl)}
	c.mu.Unlock()
}

func (c *ttlCache) drop(id int) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}
