package compat

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/util"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

const (
	group   = "DEFAULT_GROUP"
	waitCB  = 30 * time.Second // bound for a listener callback (the SDK re-syncs every 5 s)
	waitReg = 20 * time.Second // bound for a listen to be registered at the server
)

// pace spaces measured changes of one key: the SDK allows itself 5 ConfigQueryRequests per
// second per key (a process-wide token bucket, clients/config_client/limiter.go, which
// GetConfig shares); changes faster than that reach the listener up to 200 ms late (the
// SDK re-sends its batch listen in a loop meanwhile), which measures the SDK's limiter,
// not the server's push. Pacing, not a timing assertion.
func pace() { time.Sleep(250 * time.Millisecond) }

func md5hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

func TestPublishGetRemove(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})

	// A key that does not exist: the SDK answers "" without an error (errorCode 300).
	if got := mustGet(t, c, "go-missing", group); got != "" {
		t.Fatalf("GetConfig of a missing key = %q, want \"\"", got)
	}

	mustPublish(t, c, vo.ConfigParam{DataId: "go-basic", Group: group, Content: "a=1", Type: "properties"})
	if got := mustGet(t, c, "go-basic", group); got != "a=1" {
		t.Fatalf("GetConfig after publish = %q", got)
	}
	// What the SDK wrote over gRPC is what HTTP clients read, with its type.
	content, found, hdr := srv.Get("go-basic", group, "")
	if !found || content != "a=1" || hdr.Get("Config-Type") != "properties" || hdr.Get("Content-MD5") != md5hex("a=1") {
		t.Fatalf("HTTP GET after SDK publish: found=%v %q type=%q md5=%q", found, content, hdr.Get("Config-Type"), hdr.Get("Content-MD5"))
	}

	// Update, then HTTP publish read by the SDK.
	mustPublish(t, c, vo.ConfigParam{DataId: "go-basic", Group: group, Content: "a=2"})
	if got := mustGet(t, c, "go-basic", group); got != "a=2" {
		t.Fatalf("GetConfig after update = %q", got)
	}
	srv.Publish("go-basic", group, "", "a=3", nil)
	if got := mustGet(t, c, "go-basic", group); got != "a=3" {
		t.Fatalf("GetConfig after HTTP publish = %q", got)
	}

	// A custom group.
	mustPublish(t, c, vo.ConfigParam{DataId: "go-basic", Group: "GO_GROUP", Content: "other group"})
	if got := mustGet(t, c, "go-basic", "GO_GROUP"); got != "other group" {
		t.Fatalf("GetConfig GO_GROUP = %q", got)
	}

	ok, err := c.DeleteConfig(vo.ConfigParam{DataId: "go-basic", Group: group})
	if err != nil || !ok {
		t.Fatalf("DeleteConfig: ok=%v err=%v", ok, err)
	}
	if got := mustGet(t, c, "go-basic", group); got != "" {
		t.Fatalf("GetConfig after delete = %q, want \"\"", got)
	}
	if _, found, _ := srv.Get("go-basic", group, ""); found {
		t.Fatalf("HTTP GET after SDK delete still finds the config")
	}
	// Deleting what is absent succeeds, as on Nacos.
	ok, err = c.DeleteConfig(vo.ConfigParam{DataId: "go-basic", Group: group})
	if err != nil || !ok {
		t.Fatalf("DeleteConfig of an absent key: ok=%v err=%v", ok, err)
	}
	if got := mustGet(t, c, "go-basic", "GO_GROUP"); got != "other group" {
		t.Fatalf("the other group's config was touched: %q", got)
	}

	// CAS: the right md5 succeeds, a stale one fails.
	mustPublish(t, c, vo.ConfigParam{DataId: "go-cas", Group: group, Content: "v1"})
	mustPublish(t, c, vo.ConfigParam{DataId: "go-cas", Group: group, Content: "v2", CasMd5: md5hex("v1")})
	ok, err = c.PublishConfig(vo.ConfigParam{DataId: "go-cas", Group: group, Content: "v3", CasMd5: md5hex("v1")})
	if ok || err == nil {
		t.Fatalf("CAS publish with a stale md5: ok=%v err=%v, want a failure", ok, err)
	}
	t.Logf("stale CAS publish: %v", err)
	if got := mustGet(t, c, "go-cas", group); got != "v2" {
		t.Fatalf("after a failed CAS: %q, want v2", got)
	}

	// SearchConfig (HTTP v1 search, the SDK's only HTTP config call).
	page, err := c.SearchConfig(vo.SearchConfigParam{Search: "accurate", DataId: "go-cas", Group: group, PageNo: 1, PageSize: 10})
	if err != nil {
		t.Fatalf("SearchConfig: %v", err)
	}
	if page.TotalCount != 1 || len(page.PageItems) != 1 || page.PageItems[0].Content != "v2" {
		t.Fatalf("SearchConfig accurate: %+v", page)
	}
	page, err = c.SearchConfig(vo.SearchConfigParam{Search: "blur", DataId: "go-*", Group: "", PageNo: 1, PageSize: 10})
	if err != nil {
		t.Fatalf("SearchConfig blur: %v", err)
	}
	if page.TotalCount != 2 {
		t.Fatalf("SearchConfig blur go-*: total %d, want 2 (go-basic in GO_GROUP, go-cas): %+v", page.TotalCount, page)
	}
}

func TestListenFiresOnChange(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	listener := NewClient(t, []*Server{srv}, ClientOpts{AppName: "go-listener"})
	publisher := NewClient(t, []*Server{srv}, ClientOpts{AppName: "go-publisher"})
	Warm(t, publisher)

	srv.Publish("go-listen", group, "", "v0", nil)
	rec := NewRecorder(t, "listener")
	rec.Listen(listener, "go-listen", group)
	// The SDK calls a new listener with the current content (md5 "" differs from the server's).
	rec.WaitFor("go-listen", "v0", waitCB)

	for i := 1; i <= 5; i++ {
		pace()
		want := fmt.Sprintf("v%d via SDK", i)
		start := time.Now()
		mustPublish(t, publisher, vo.ConfigParam{DataId: "go-listen", Group: group, Content: want})
		e := rec.WaitFor("go-listen", want, waitCB)
		recordDelay(t, "listen/sdk-publish", e.At.Sub(start))
		if e.Namespace != "" || e.Group != group {
			t.Fatalf("callback key: namespace %q group %q", e.Namespace, e.Group)
		}
	}
	for i := 1; i <= 5; i++ {
		pace()
		want := fmt.Sprintf("v%d via HTTP", i)
		start := time.Now()
		srv.Publish("go-listen", group, "", want, nil)
		e := rec.WaitFor("go-listen", want, waitCB)
		recordDelay(t, "listen/http-publish", e.At.Sub(start))
	}

	// Deleting the config calls the listener with "" (the SDK's view of a missing config).
	pace()
	start := time.Now()
	srv.Delete("go-listen", group, "")
	e := rec.WaitFor("go-listen", "", waitCB)
	recordDelay(t, "listen/http-delete", e.At.Sub(start))

	// Every ConfigChangeNotifyRequest pushed was acknowledged by the SDK (it answers with a
	// NotifySubscriberResponse), so nothing was resent. (Checked before the cancel below: the SDK does
	// not answer a push for a key it no longer listens to, and never tells the server it
	// stopped — nacos-sdk-go #629 — so that push is resent, as Nacos resends it.)
	m := srv.Metrics()
	pushes, acks, retries := m["nacelle_grpc_pushes_total"], m["nacelle_grpc_push_acks_total"], m["nacelle_grpc_push_retries_total"]
	t.Logf("server: %v pushes, %v acks, %v retries; push→ack latency sum %.1f ms over %v",
		pushes, acks, retries, 1000*m["nacelle_push_latency_seconds_sum"], m["nacelle_push_latency_seconds_count"])
	if pushes == 0 || acks != pushes || retries != 0 {
		t.Fatalf("pushes %v, acks %v, retries %v: the SDK's acks are not all taken", pushes, acks, retries)
	}

	// After CancelListenConfig, no callback. The SDK only drops the key from its own map
	// (the server is not told, nacos-sdk-go #629), and a listen round still running
	// writes the entry back (#913): let the round of the delete above finish first.
	time.Sleep(1500 * time.Millisecond)
	if err := listener.CancelListenConfig(vo.ConfigParam{DataId: "go-listen", Group: group}); err != nil {
		t.Fatalf("CancelListenConfig: %v", err)
	}
	srv.Publish("go-listen", group, "", "after cancel", nil)
	// A marker key on the same client proves callbacks still flow after the cancelled one's change.
	srv.Publish("go-listen-marker", group, "", "m0", nil)
	rec.Listen(listener, "go-listen-marker", group)
	rec.WaitFor("go-listen-marker", "m0", waitCB)
	pace()
	srv.Publish("go-listen-marker", group, "", "m1", nil)
	rec.WaitFor("go-listen-marker", "m1", waitCB)
	if rec.Saw("go-listen", "after cancel") {
		t.Fatalf("a cancelled listener was called")
	}
}

func TestListenBeforeKeyExists(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	rec := NewRecorder(t, "listener")
	rec.Listen(c, "go-later", group)
	// Wait until the SDK's batch listen reached the server, so the value comes by push.
	srv.WaitListening("go-later", group, "", waitReg)
	rec.Drain()
	if len(rec.seen) != 0 {
		t.Fatalf("callbacks before the key exists: %+v", rec.seen)
	}
	start := time.Now()
	srv.Publish("go-later", group, "", "first value", nil)
	e := rec.WaitFor("go-later", "first value", waitCB)
	recordDelay(t, "listen/before-key-exists", e.At.Sub(start))
	if got := mustGet(t, c, "go-later", group); got != "first value" {
		t.Fatalf("GetConfig = %q", got)
	}
}

func TestTwentyKeysOneClient(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	rec := NewRecorder(t, "listener")
	const n = 20
	key := func(i int) string { return fmt.Sprintf("go-multi-%02d.yaml", i) }
	for i := 0; i < n; i++ {
		srv.Publish(key(i), group, "", fmt.Sprintf("k: %d\nrev: 0", i), nil)
	}
	for i := 0; i < n; i++ {
		rec.Listen(c, key(i), group)
	}
	for i := 0; i < n; i++ {
		rec.WaitFor(key(i), fmt.Sprintf("k: %d\nrev: 0", i), waitCB)
	}
	// One change at a time: the SDK loses a push that lands while its listen round for
	// another push is in flight (its cache entries are copied, changed and written back
	// without a lock, so the round marks the newly pushed key "in sync" — nacos-sdk-go
	// issues #608 and #913); that key's change then waits for the SDK's full re-sync,
	// every 5 minutes. Against Nacos the same. So changes of different keys of one
	// client are spaced here, and each waited for.
	for i := 0; i < n; i++ {
		pace()
		want := fmt.Sprintf("k: %d\nrev: 1", i)
		start := time.Now()
		srv.Publish(key(i), group, "", want, nil)
		e := rec.WaitFor(key(i), want, waitCB)
		recordDelay(t, "listen/20-keys", e.At.Sub(start))
	}
	for i := 0; i < n; i++ {
		if got := mustGet(t, c, key(i), group); got != fmt.Sprintf("k: %d\nrev: 1", i) {
			t.Fatalf("GetConfig %s = %q", key(i), got)
		}
	}
	// Only the changed key's listener fires.
	pace()
	start := time.Now()
	srv.Publish(key(7), group, "", "k: 7\nrev: 2", nil)
	e := rec.WaitFor(key(7), "k: 7\nrev: 2", waitCB)
	recordDelay(t, "listen/20-keys", e.At.Sub(start))
	for _, e := range rec.Unclaimed() {
		t.Fatalf("unexpected callback of %s with %q", e.DataID, e.Content)
	}
}

func TestNamespace(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	const ns = "go-dev-ns"
	srv.CreateNamespace(ns, "Go dev")
	c := NewClient(t, []*Server{srv}, ClientOpts{Namespace: ns})
	pub := NewClient(t, []*Server{srv}, ClientOpts{}) // default namespace

	mustPublish(t, c, vo.ConfigParam{DataId: "go-ns.yaml", Group: group, Content: "in dev"})
	mustPublish(t, pub, vo.ConfigParam{DataId: "go-ns.yaml", Group: group, Content: "in public"})
	if got := mustGet(t, c, "go-ns.yaml", group); got != "in dev" {
		t.Fatalf("namespace client reads %q", got)
	}
	if got := mustGet(t, pub, "go-ns.yaml", group); got != "in public" {
		t.Fatalf("public client reads %q", got)
	}
	if got, found, _ := srv.Get("go-ns.yaml", group, ns); !found || got != "in dev" {
		t.Fatalf("HTTP GET tenant=%s: %v %q", ns, found, got)
	}

	// The client read the key (GetConfig caches it), so its listener starts from that
	// content and is called on changes only (the SDK's behaviour).
	rec := NewRecorder(t, "ns listener")
	rec.Listen(c, "go-ns.yaml", group)
	srv.WaitListening("go-ns.yaml", group, ns, waitReg)
	// A change in the default namespace must not reach the namespace's listener ...
	srv.Publish("go-ns.yaml", group, "", "public changed", nil)
	// ... a change in the namespace must.
	start := time.Now()
	srv.Publish("go-ns.yaml", group, ns, "dev changed", nil)
	e := rec.WaitFor("go-ns.yaml", "dev changed", waitCB)
	recordDelay(t, "listen/namespace", e.At.Sub(start))
	if e.Namespace != ns || e.Group != group {
		t.Fatalf("callback namespace %q group %q, want %q %q", e.Namespace, e.Group, ns, group)
	}
	if rec.Saw("go-ns.yaml", "public changed") {
		t.Fatalf("a change in the public namespace reached the listener of namespace %s", ns)
	}
	ok, err := c.DeleteConfig(vo.ConfigParam{DataId: "go-ns.yaml", Group: group})
	if !ok || err != nil {
		t.Fatalf("DeleteConfig in namespace: %v %v", ok, err)
	}
	if got := mustGet(t, pub, "go-ns.yaml", group); got != "public changed" {
		t.Fatalf("deleting in %s touched public: %q", ns, got)
	}
}

// 64 KiB of mixed ASCII, Chinese (3 bytes) and emoji (4 bytes), exactly 65536 bytes.
func bigUnicode() string {
	var b strings.Builder
	pieces := []string{"key.", "配置中心", "🚀", "=", "值😀", "\n", "ü", "日本語", "\t", "\"quoted\" "}
	for i := 0; b.Len() < 65536-64; i++ {
		b.WriteString(pieces[i%len(pieces)])
	}
	for b.Len() < 65536 {
		b.WriteByte('x')
	}
	return b.String()
}

// roundTrip: prefix keeps the dataIds apart from other tests' (the SDK's query rate limiter
// is process-wide per dataId+group+tenant, whatever the server).
func roundTrip(t *testing.T, srv *Server, opts ClientOpts, prefix string) {
	c := NewClient(t, []*Server{srv}, opts)
	other := NewClient(t, []*Server{srv}, opts)
	Warm(t, other)
	big := bigUnicode()
	if n := len(big); n != 65536 {
		t.Fatalf("big content is %d bytes", n)
	}
	contents := map[string]string{
		prefix + "-big.txt":     big,
		prefix + "-unicode.txt": "名称=配置中心\nemoji=🎉🚀👍🏽\nflag=🇨🇳\nmixed=Grüße, 世界! 😀",
	}
	rec := NewRecorder(t, "listener")
	for id := range contents {
		rec.Listen(c, id, group)
		srv.WaitListening(id, group, opts.Namespace, waitReg)
	}
	for id, want := range contents {
		// SDK → SDK (gRPC both ways), and the listener gets it byte for byte.
		pace()
		start := time.Now()
		mustPublish(t, other, vo.ConfigParam{DataId: id, Group: group, Content: want})
		e := rec.WaitFor(id, want, waitCB)
		recordDelay(t, "listen/64KiB-and-unicode", e.At.Sub(start))
		if got := mustGet(t, c, id, group); got != want {
			t.Fatalf("%s: SDK GetConfig differs (len %d vs %d)", id, len(got), len(want))
		}
		// SDK → HTTP
		if got, found, hdr := srv.Get(id, group, opts.Namespace); !found || got != want || hdr.Get("Content-MD5") != md5hex(want) {
			t.Fatalf("%s: HTTP GET differs (found %v, len %d vs %d, md5 %s)", id, found, len(got), len(want), hdr.Get("Content-MD5"))
		}
		// HTTP → SDK
		want2 := want + "\n改"
		pace()
		srv.Publish(id, group, opts.Namespace, want2, nil)
		rec.WaitFor(id, want2, waitCB)
		if got := mustGet(t, c, id, group); got != want2 {
			t.Fatalf("%s: SDK GetConfig after HTTP publish differs (len %d vs %d)", id, len(got), len(want2))
		}
	}
}

func TestLargeAndUnicodeContent(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	roundTrip(t, srv, ClientOpts{}, "go-plain")

	// Unicode and punctuation in the key itself (names allow letters of any script, _-.:).
	const id, grp = "go-中文:配置_v1.2-a.yaml", "GO_组-1.a:b"
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	rec := NewRecorder(t, "listener")
	rec.Listen(c, id, grp)
	srv.WaitListening(id, grp, "", waitReg)
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: grp, Content: "键: 值 🚀"})
	e := rec.WaitFor(id, "键: 值 🚀", waitCB)
	if e.Group != grp {
		t.Fatalf("callback group %q", e.Group)
	}
	if got, found, _ := srv.Get(id, grp, ""); !found || got != "键: 值 🚀" {
		t.Fatalf("HTTP GET of a Unicode key: %v %q", found, got)
	}
	pace()
	srv.Publish(id, grp, "", "键: 新值", nil)
	rec.WaitFor(id, "键: 新值", waitCB)
	if got := mustGet(t, c, id, grp); got != "键: 新值" {
		t.Fatalf("GetConfig of a Unicode key: %q", got)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{Auth: true})
	pw := srv.AdminPassword()

	t.Run("RoundTrip", func(t *testing.T) {
		roundTrip(t, srv, ClientOpts{Username: "nacos", Password: pw}, "go-auth")
		// SearchConfig is the SDK's HTTP call: the token goes as the accessToken parameter.
		c := NewClient(t, []*Server{srv}, ClientOpts{Username: "nacos", Password: pw})
		page, err := c.SearchConfig(vo.SearchConfigParam{Search: "blur", DataId: "go-auth-*", PageNo: 1, PageSize: 10})
		if err != nil || page.TotalCount != 2 {
			t.Fatalf("SearchConfig with auth: %+v, %v", page, err)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		srv.Publish("go-secret", group, "", "top secret", nil)
		bad := NewClient(t, []*Server{srv}, ClientOpts{Username: "nacos", Password: pw + "-wrong"})
		// The SDK's login fails (logged, not returned by NewConfigClient); every call then
		// reaches the server without a token and is refused with 403.
		got, err := bad.GetConfig(vo.ConfigParam{DataId: "go-secret", Group: group})
		if err == nil || got == "top secret" {
			t.Fatalf("GetConfig with a wrong password: %q, %v; want an error", got, err)
		}
		t.Logf("GetConfig with a wrong password: err=%v", err)
		if !strings.Contains(err.Error(), "user not found") {
			t.Fatalf("GetConfig error %q does not say the user is not authenticated", err)
		}
		ok, err := bad.PublishConfig(vo.ConfigParam{DataId: "go-secret", Group: group, Content: "overwritten"})
		if ok || err == nil {
			t.Fatalf("PublishConfig with a wrong password: ok=%v err=%v", ok, err)
		}
		t.Logf("PublishConfig with a wrong password: err=%v", err)
		ok, err = bad.DeleteConfig(vo.ConfigParam{DataId: "go-secret", Group: group})
		if ok || err == nil {
			t.Fatalf("DeleteConfig with a wrong password: ok=%v err=%v", ok, err)
		}
		// A listener is never called with the content.
		rec := NewRecorder(t, "bad listener")
		rec.Listen(bad, "go-secret", group)
		// A good client on the same key proves a listen round has happened meanwhile.
		good := NewClient(t, []*Server{srv}, ClientOpts{Username: "nacos", Password: pw})
		goodRec := NewRecorder(t, "good listener")
		goodRec.Listen(good, "go-secret", group)
		goodRec.WaitFor("go-secret", "top secret", waitCB)
		// A whole SDK listen round (every 5 s) of the bad client after that: the server
		// refuses its listen requests (the only ones refused here), and the second one
		// refused from now on was sent once the first had been answered.
		refused := func() float64 {
			return srv.Metric("nacelle_grpc_requests_total", `request="ConfigBatchListenRequest"`, `code="403"`)
		}
		mark := refused()
		for deadline := time.Now().Add(waitCB); refused() < mark+2; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the bad client's listen was refused %v times in %v, not twice", refused()-mark, waitCB)
			}
		}
		if rec.Saw("go-secret", "top secret") {
			t.Fatalf("a client with a wrong password received the content")
		}
		if got, _, _ := srv.Get("go-secret", group, ""); got != "top secret" {
			t.Fatalf("content changed by a client with a wrong password: %q", got)
		}
		if page, err := bad.SearchConfig(vo.SearchConfigParam{Search: "accurate", DataId: "go-secret", Group: group}); err == nil {
			t.Fatalf("SearchConfig with a wrong password: %+v, want an error", page)
		} else {
			t.Logf("SearchConfig with a wrong password: err=%v", err)
		}
		// No credentials at all: the same refusals.
		anon := NewClient(t, []*Server{srv}, ClientOpts{})
		if got, err := anon.GetConfig(vo.ConfigParam{DataId: "go-secret", Group: group}); err == nil || got == "top secret" {
			t.Fatalf("GetConfig without credentials: %q, %v", got, err)
		}
	})
}

// reportedIP is the address the Go SDK reports about itself (metadata.clientIp, util.LocalIP:
// the first non-loopback IPv4 address), which betas match as Nacos matches them; a client
// that reports none is matched by its socket address, 127.0.0.1 here.
func reportedIP() string {
	if ip := util.LocalIP(); ip != "" {
		return ip
	}
	return "127.0.0.1"
}

func TestBetaByClientIP(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	const id = "go-beta.properties"
	me := reportedIP()
	srv.Publish(id, group, "", "formal=1", nil)
	rec := NewRecorder(t, "listener@"+me)
	rec.Listen(c, id, group)
	rec.WaitFor(id, "formal=1", waitCB)
	srv.WaitListening(id, group, "", waitReg)

	// A beta for another address: this client keeps the formal content.
	srv.Publish(id, group, "", "beta-for-.2", map[string]string{"betaIps": "127.0.0.2"})
	if got := mustGet(t, c, id, group); got != "formal=1" {
		t.Fatalf("client reporting %s reads %q while the beta is for 127.0.0.2", me, got)
	}
	// A formal change afterwards arrives as formal content.
	pace()
	start := time.Now()
	srv.Publish(id, group, "", "formal=2", nil)
	e := rec.WaitFor(id, "formal=2", waitCB)
	recordDelay(t, "listen/formal-under-beta", e.At.Sub(start))
	if rec.Saw(id, "beta-for-.2") {
		t.Fatalf("the beta for 127.0.0.2 reached the client reporting %s", me)
	}

	// A beta for the address this client reports reaches it, whatever its socket.
	pace()
	start = time.Now()
	srv.Publish(id, group, "", "beta-for-me", map[string]string{"betaIps": "127.0.0.2," + me})
	e = rec.WaitFor(id, "beta-for-me", waitCB)
	recordDelay(t, "listen/beta", e.At.Sub(start))
	if got := mustGet(t, c, id, group); got != "beta-for-me" {
		t.Fatalf("GetConfig under a beta for %s: %q", me, got)
	}
	// Over HTTP the reported address is X-Forwarded-For (as Nacos reads it).
	code, body, hdr := srv.Do(http.MethodGet, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}},
		map[string]string{"X-Forwarded-For": me})
	if code != 200 || body != "beta-for-me" || hdr.Get("isBeta") != "true" {
		t.Fatalf("HTTP GET forwarded for %s under its beta: %d %q isBeta=%q", me, code, body, hdr.Get("isBeta"))
	}

	// Stopping the beta sends the formal content back.
	pace()
	start = time.Now()
	code, body, _ = srv.Do(http.MethodDelete, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}, "beta": {"true"}}, nil)
	if code != 200 {
		t.Fatalf("stop beta: %d %s", code, body)
	}
	e = rec.WaitFor(id, "formal=2", waitCB)
	recordDelay(t, "listen/beta-stopped", e.At.Sub(start))
	if got := mustGet(t, c, id, group); got != "formal=2" {
		t.Fatalf("GetConfig after the beta stopped: %q", got)
	}

	// A beta for the socket address (127.0.0.1) reaches an HTTP reader that reports
	// nothing, not this client when it reports another address.
	if me != "127.0.0.1" {
		srv.Publish(id, group, "", "beta-for-socket", map[string]string{"betaIps": "127.0.0.1"})
		if got, _, hdr := srv.Get(id, group, ""); got != "beta-for-socket" || hdr.Get("isBeta") != "true" {
			t.Fatalf("HTTP GET from 127.0.0.1 under its beta: %q isBeta=%q", got, hdr.Get("isBeta"))
		}
		pace()
		srv.Publish(id, group, "", "formal=3", nil)
		rec.WaitFor(id, "formal=3", waitCB)
		if rec.Saw(id, "beta-for-socket") {
			t.Fatalf("the beta for the socket address reached the client reporting %s", me)
		}
	}
}

// With authentication on, as deployed: the SDK's token stays valid across the restart
// (the signing secret is kept in the data directory).
func TestServerRestartUnderListener(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{Auth: true})
	c := NewClient(t, []*Server{srv}, ClientOpts{Username: "nacos", Password: srv.AdminPassword()})
	const id = "go-restart.yaml"
	srv.Publish(id, group, "", "before", nil)
	rec := NewRecorder(t, "listener")
	rec.Listen(c, id, group)
	rec.WaitFor(id, "before", waitCB)
	srv.WaitListening(id, group, "", waitReg)

	for i, how := range []string{"SIGTERM", "SIGKILL"} {
		if how == "SIGTERM" {
			srv.Stop()
		} else {
			srv.Kill()
		}
		srv.Restart()
		// The SDK reconnects and re-sends its listen set; then the change is pushed.
		srv.WaitListening(id, group, "", waitCB)
		want := fmt.Sprintf("after restart %d (%s)", i+1, how)
		pace()
		start := time.Now()
		srv.Publish(id, group, "", want, nil)
		e := rec.WaitFor(id, want, waitCB)
		recordDelay(t, "listen/after-restart", e.At.Sub(start))
		if got := mustGet(t, c, id, group); got != want {
			t.Fatalf("GetConfig after restart: %q", got)
		}
		ok, err := c.PublishConfig(vo.ConfigParam{DataId: id + ".w", Group: group, Content: want})
		if !ok || err != nil {
			t.Fatalf("SDK publish after restart (%s): %v %v", how, ok, err)
		}
	}

	// A change made while the server is down is not lost: published right after the
	// restart, before the client has reconnected, it reaches the listener too.
	srv.Kill()
	srv.Restart()
	start := time.Now()
	srv.Publish(id, group, "", "published before the client reconnected", nil)
	e := rec.WaitFor(id, "published before the client reconnected", waitCB)
	t.Logf("change published right after restart arrived after %v", e.At.Sub(start))
}

// What the SDK's PublishConfig sends in additionMap (appName, type, config_tags, src_user,
// tag, betaIps — always all keys, "" meaning absent) lands where HTTP readers see it.
func TestPublishMetadataTagAndBeta(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{AppName: "go-app"})
	const id = "go-meta.yaml"
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: "a: 1", AppName: "go-app",
		Type: "yaml", ConfigTags: "go,sdk", SrcUser: "go-user"})
	code, body, _ := srv.Do(http.MethodGet, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}, "show": {"all"}}, nil)
	if code != 200 {
		t.Fatalf("show=all: %d %s", code, body)
	}
	var rec struct {
		Content, AppName, Type, ConfigTags, CreateUser string
	}
	if err := json.Unmarshal([]byte(body), &rec); err != nil {
		t.Fatalf("show=all body %s: %v", body, err)
	}
	if rec.Content != "a: 1" || rec.AppName != "go-app" || rec.Type != "yaml" || rec.ConfigTags != "go,sdk" {
		t.Fatalf("show=all after an SDK publish with metadata: %s", body)
	}
	t.Logf("show=all: %s", body)

	// Tag: a tagged variant; the SDK's GetConfig (no tag) still reads the formal content.
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: "a: tagged", Tag: "gotag"})
	if got := mustGet(t, c, id, group); got != "a: 1" {
		t.Fatalf("GetConfig after a tag publish: %q, want the formal a: 1", got)
	}
	code, body, _ = srv.Do(http.MethodGet, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}, "tag": {"gotag"}}, nil)
	if code != 200 || body != "a: tagged" {
		t.Fatalf("HTTP GET tag=gotag: %d %q", code, body)
	}

	// Beta through the SDK (additionMap.betaIps): reaches this client (the address it
	// reports).
	me := reportedIP()
	rl := NewRecorder(t, "listener")
	lc := NewClient(t, []*Server{srv}, ClientOpts{})
	rl.Listen(lc, id, group)
	rl.WaitFor(id, "a: 1", waitCB)
	srv.WaitListening(id, group, "", waitReg)
	pace()
	start := time.Now()
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: "a: beta", BetaIps: me})
	e := rl.WaitFor(id, "a: beta", waitCB)
	recordDelay(t, "listen/beta-via-sdk", e.At.Sub(start))
	code, body, _ = srv.Do(http.MethodGet, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}, "beta": {"true"}}, nil)
	if code != 200 || !strings.Contains(body, `"betaIps":"`+me+`"`) || !strings.Contains(body, `"content":"a: beta"`) {
		t.Fatalf("HTTP ?beta=true after an SDK beta publish: %d %s", code, body)
	}
	// The formal config is untouched, and show=all (what the console edits) is the formal
	// record even for a caller on the beta IP, as on Nacos.
	onBetaIP := map[string]string{"X-Forwarded-For": me}
	code, body, _ = srv.Do(http.MethodGet, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}, "show": {"all"}}, onBetaIP)
	if code != 200 || !strings.Contains(body, `"content":"a: 1"`) {
		t.Fatalf("show=all from the beta IP after an SDK beta publish: %s", body)
	}
	if code, body, _ := srv.Do(http.MethodGet, "/v1/cs/configs", url.Values{"dataId": {id}, "group": {group}}, onBetaIP); code != 200 || body != "a: beta" {
		t.Fatalf("plain GET from the beta IP: %d %q, want the beta", code, body)
	}
	if got := mustGet(t, lc, id, group); got != "a: beta" {
		t.Fatalf("SDK GetConfig from the beta IP: %q, want the beta", got)
	}
}

// Label gray (Nacelle's tagv2 rules, Nacos's development line): the SDK's AppConnLabels
// (sent as app_<key> connection labels) and AppName select a variant; others keep the
// formal config.
func TestLabelGray(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	const id = "go-label-gray.yaml"
	srv.Publish(id, group, "", "formal", nil)
	canary := NewClient(t, []*Server{srv}, ClientOpts{Labels: map[string]string{"env": "canary"}})
	shop := NewClient(t, []*Server{srv}, ClientOpts{AppName: "go-shop"})
	plain := NewClient(t, []*Server{srv}, ClientOpts{})
	recs := map[string]*Recorder{}
	for name, c := range map[string]interface{ ListenConfig(vo.ConfigParam) error }{"canary": canary, "shop": shop, "plain": plain} {
		r := NewRecorder(t, name)
		if err := c.ListenConfig(vo.ConfigParam{DataId: id, Group: group, OnChange: r.OnChange}); err != nil {
			t.Fatal(err)
		}
		r.WaitFor(id, "formal", waitCB)
		recs[name] = r
	}
	grayPublish := func(name, rule, prio, content string) {
		t.Helper()
		code, body, _ := srv.Do(http.MethodPost, "/v2/cs/config", url.Values{"dataId": {id}, "group": {group},
			"content": {content}, "grayName": {name}, "grayRule": {rule}, "grayPriority": {prio}}, nil)
		if code != 200 || !strings.Contains(body, `"code":0`) {
			t.Fatalf("gray publish %s: %d %s", name, code, body)
		}
	}
	pace()
	start := time.Now()
	grayPublish("canary", "env=canary", "10", "for canary")
	e := recs["canary"].WaitFor(id, "for canary", waitCB)
	recordDelay(t, "listen/label-gray", e.At.Sub(start))
	grayPublish("shop", "AppName=go-shop", "5", "for shop")
	recs["shop"].WaitFor(id, "for shop", waitCB)
	if got := mustGet(t, canary, id, group); got != "for canary" {
		t.Fatalf("canary client reads %q", got)
	}
	if got := mustGet(t, shop, id, group); got != "for shop" {
		t.Fatalf("shop client reads %q", got)
	}
	if got := mustGet(t, plain, id, group); got != "formal" {
		t.Fatalf("unlabelled client reads %q", got)
	}
	// A formal change reaches the unlabelled client, which never saw a variant.
	srv.Publish(id, group, "", "formal 2", nil)
	recs["plain"].WaitFor(id, "formal 2", waitCB)
	for _, c := range []string{"for canary", "for shop"} {
		if recs["plain"].Saw(id, c) {
			t.Fatalf("the unlabelled client got %q", c)
		}
	}
	if recs["canary"].Saw(id, "for shop") || recs["shop"].Saw(id, "for canary") {
		t.Fatalf("a variant reached the wrong client")
	}
}

// TLS on both ports (HTTPS for the SDK's login and search, gRPC over TLS) with auth on:
// the SDK verifies the server against the CA file.
func TestTLSWithAuth(t *testing.T) {
	t.Parallel()
	files := NewTLSFiles(t)
	srv := StartServer(t, ServerOpts{Auth: true, TLS: files})
	opts := ClientOpts{Username: "nacos", Password: srv.AdminPassword(), TLSCA: files.CAFile}
	roundTrip(t, srv, opts, "go-tls")
	c := NewClient(t, []*Server{srv}, opts)
	page, err := c.SearchConfig(vo.SearchConfigParam{Search: "blur", DataId: "go-tls-*", PageNo: 1, PageSize: 10})
	if err != nil || page.TotalCount != 2 {
		t.Fatalf("SearchConfig over HTTPS: %+v, %v", page, err)
	}
}

// NamespaceId "public" (Nacos 3.0's name of the default namespace, and what many users
// write) is the default namespace: the same configs, and pushes reach the listener under
// the namespace as the client named it (the SDK keys its listeners by it).
func TestPublicNamespaceName(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	const id = "go-public.yaml"
	srv.Publish(id, group, "", "v0", nil)
	c := NewClient(t, []*Server{srv}, ClientOpts{Namespace: "public"})
	rec := NewRecorder(t, "listener(public)")
	rec.Listen(c, id, group)
	e := rec.WaitFor(id, "v0", waitCB)
	if e.Namespace != "public" {
		t.Fatalf("callback namespace %q", e.Namespace)
	}
	srv.WaitListening(id, group, "", waitReg)
	for i := 1; i <= 3; i++ {
		pace()
		want := fmt.Sprintf("v%d", i)
		start := time.Now()
		srv.Publish(id, group, "", want, nil)
		e = rec.WaitFor(id, want, 15*time.Second)
		recordDelay(t, "listen/namespace-public", e.At.Sub(start))
	}
	// Spaced like every measured change: a push landing while the SDK's listen round runs
	// after the previous callback can be lost until its 5-minute sync (README, #608/#913).
	pace()
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: "via public"})
	if got, _, _ := srv.Get(id, group, ""); got != "via public" {
		t.Fatalf("HTTP GET default namespace after an SDK publish to public: %q", got)
	}
	rec.WaitFor(id, "via public", waitCB)
}

// A 4 MiB config (beyond gRPC's default 4 MiB message size only with its JSON framing) both
// ways: SDK publish (client → server message) and SDK query and push-triggered refresh
// (server → client).
func TestLargeConfig4MiB(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	var b strings.Builder
	for i := 0; b.Len() < 4<<20; i++ {
		fmt.Fprintf(&b, "line.%07d=配置值-%d\n", i, i)
	}
	big := b.String()
	const id = "go-4mib.properties"
	rec := NewRecorder(t, "listener")
	rec.Listen(c, id, group)
	srv.WaitListening(id, group, "", waitReg)
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: big})
	rec.WaitFor(id, big, waitCB)
	if got, _, hdr := srv.Get(id, group, ""); got != big || hdr.Get("Content-MD5") != md5hex(big) {
		t.Fatalf("HTTP GET of 4 MiB: len %d", len(got))
	}
	pace()
	srv.Publish(id, group, "", big+"end=1\n", nil)
	rec.WaitFor(id, big+"end=1\n", waitCB)
	if got := mustGet(t, c, id, group); got != big+"end=1\n" {
		t.Fatalf("GetConfig of 4 MiB: len %d", len(got))
	}
}

// The application starts before the server (a common deployment order): the SDK keeps
// trying, connects once the server is up, registers its listener and gets changes.
func TestClientStartsBeforeServer(t *testing.T) {
	t.Parallel()
	srv := ReserveServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	rec := NewRecorder(t, "listener")
	const id = "go-early.yaml"
	rec.Listen(c, id, group)
	time.Sleep(2 * time.Second) // the SDK's connect attempts fail meanwhile
	srv.Launch()
	srv.WaitListening(id, group, "", waitCB)
	start := time.Now()
	srv.Publish(id, group, "", "server came later", nil)
	e := rec.WaitFor(id, "server came later", waitCB)
	recordDelay(t, "listen/client-before-server", e.At.Sub(start))
	pace() // see TestPublicNamespaceName
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: "and the SDK writes"})
	rec.WaitFor(id, "and the SDK writes", waitCB)
}
