package compat

// The real Go SDK client, configured as a user would (default gRPC port derivation:
// HTTP port + 1000), but quiet (log and cache dirs in temp dirs) and fast.

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

type ClientOpts struct {
	Namespace string
	Username  string
	Password  string
	AppName   string
	Labels    map[string]string // AppConnLabels (the SDK sends them prefixed app_)
	TLSCA     string            // CA file: HTTPS (login, search) and gRPC over TLS
}

func NewClient(t testing.TB, servers []*Server, o ClientOpts) config_client.IConfigClient {
	t.Helper()
	var scs []constant.ServerConfig
	for _, s := range servers {
		// GrpcPort left 0: the SDK derives it as Port + 1000, as it does for users.
		sc := constant.ServerConfig{IpAddr: "127.0.0.1", Port: uint64(s.Port)}
		if o.TLSCA != "" {
			sc.Scheme = "https"
		}
		scs = append(scs, sc)
	}
	cc := constant.ClientConfig{
		NamespaceId:         o.Namespace,
		TimeoutMs:           5000,
		AppName:             o.AppName,
		Username:            o.Username,
		Password:            o.Password,
		NotLoadCacheAtStart: true,
		DisableUseSnapShot:  true, // a failing server must show, not be papered over by the snapshot
		CacheDir:            t.TempDir(),
		LogDir:              sdkLogDir,
		LogLevel:            sdkLogLevel(),
		AppConnLabels:       o.Labels,
	}
	if o.TLSCA != "" {
		cc.TLSCfg = constant.TLSConfig{Appointed: true, Enable: true, CaFile: o.TLSCA}
	}
	c, err := clients.NewConfigClient(vo.NacosClientParam{ClientConfig: &cc, ServerConfigs: scs})
	if err != nil {
		t.Fatalf("NewConfigClient: %v", err)
	}
	t.Cleanup(c.CloseClient)
	return c
}

// sdkLogLevel is the SDK's log level: info, or GO_SDK_LOG_LEVEL (debug to see every request).
func sdkLogLevel() string {
	if l := os.Getenv("GO_SDK_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// ---- listener recorder ----

type Event struct {
	Namespace, Group, DataID, Content string
	At                                time.Time
}

type Recorder struct {
	t    testing.TB
	name string
	ch   chan Event
	seen []Event
	used []bool // seen[i] was returned by WaitFor
}

func NewRecorder(t testing.TB, name string) *Recorder {
	return &Recorder{t: t, name: name, ch: make(chan Event, 1024)}
}

func (r *Recorder) OnChange(namespace, group, dataID, data string) {
	r.ch <- Event{namespace, group, dataID, data, time.Now()}
}

// Listen registers the recorder with the SDK's ListenConfig.
func (r *Recorder) Listen(c config_client.IConfigClient, dataID, group string) {
	r.t.Helper()
	if err := c.ListenConfig(vo.ConfigParam{DataId: dataID, Group: group, OnChange: r.OnChange}); err != nil {
		r.t.Fatalf("ListenConfig %s/%s: %v", group, dataID, err)
	}
}

func short(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", s[:60], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// WaitFor waits (bounded) for a callback of dataID with exactly want that no earlier
// WaitFor returned; callbacks of other keys or contents are kept for later calls.
func (r *Recorder) WaitFor(dataID, want string, within time.Duration) Event {
	r.t.Helper()
	for i, e := range r.seen {
		if !r.used[i] && e.DataID == dataID && e.Content == want {
			r.used[i] = true
			return e
		}
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e := <-r.ch:
			match := e.DataID == dataID && e.Content == want
			r.seen = append(r.seen, e)
			r.used = append(r.used, match)
			if match {
				return e
			}
		case <-timer.C:
			var got []string
			for _, e := range r.seen {
				if e.DataID == dataID {
					got = append(got, short(e.Content))
				}
			}
			r.t.Fatalf("%s: no callback of %q with content %s within %v; callbacks of that key so far: [%s]",
				r.name, dataID, short(want), within, strings.Join(got, ", "))
			return Event{}
		}
	}
}

// Drain moves callbacks already delivered into r.seen without waiting.
func (r *Recorder) Drain() {
	for {
		select {
		case e := <-r.ch:
			r.seen = append(r.seen, e)
			r.used = append(r.used, false)
		default:
			return
		}
	}
}

// Unclaimed returns the callbacks delivered that no WaitFor returned.
func (r *Recorder) Unclaimed() []Event {
	r.Drain()
	var out []Event
	for i, e := range r.seen {
		if !r.used[i] {
			out = append(out, e)
		}
	}
	return out
}

// Saw reports whether a callback of dataID with content was ever delivered.
func (r *Recorder) Saw(dataID, content string) bool {
	r.Drain()
	for _, e := range r.seen {
		if e.DataID == dataID && e.Content == content {
			return true
		}
	}
	return false
}

var warmSeq atomic.Int64

// Warm makes the client open its gRPC connection (lazily opened by the first request, and
// the SDK sleeps 100 ms after its ConnectionSetupRequest), so that a measured publish
// measures the publish. The key is unique: the SDK rate-limits queries per key process-wide.
func Warm(t testing.TB, c config_client.IConfigClient) {
	t.Helper()
	if _, err := c.GetConfig(vo.ConfigParam{DataId: fmt.Sprintf("go-warmup-%d", warmSeq.Add(1)), Group: "DEFAULT_GROUP"}); err != nil {
		t.Fatalf("warm-up GetConfig: %v", err)
	}
}

func mustPublish(t testing.TB, c config_client.IConfigClient, p vo.ConfigParam) {
	t.Helper()
	ok, err := c.PublishConfig(p)
	if err != nil || !ok {
		t.Fatalf("SDK PublishConfig %s/%s: ok=%v err=%v", p.Group, p.DataId, ok, err)
	}
}

func mustGet(t testing.TB, c config_client.IConfigClient, dataID, group string) string {
	t.Helper()
	s, err := c.GetConfig(vo.ConfigParam{DataId: dataID, Group: group})
	// The SDK's own limiter (5 queries per second per key, process-wide) refuses without
	// asking the server: wait for a token rather than fail on the SDK's bookkeeping.
	for i := 0; i < 20 && err != nil && strings.Contains(err.Error(), "ConfigQueryRequest is limited"); i++ {
		time.Sleep(250 * time.Millisecond)
		s, err = c.GetConfig(vo.ConfigParam{DataId: dataID, Group: group})
	}
	if err != nil {
		t.Fatalf("SDK GetConfig %s/%s: %v", group, dataID, err)
	}
	return s
}
